package service

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Acquire asks for lock on behalf of client (L4, L8, S1-S2, D1-D5). It returns
// lk.ErrInvalidTTL for a ttl outside 1..lk.MaxTTL and lk.ErrClientBusy when the
// client waits for a lock or already holds this one. Otherwise the client is
// registered if it was not, and the request is granted on the spot (empty
// queue, compatible holders), or queued and checked for deadlock.
func (s *Service) Acquire(ctx context.Context, ts int64, client, lock string, ttl int64, mode lk.Mode) (lk.AcquireResult, error) {
	var res lk.AcquireResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(client, lock); err != nil {
			return err
		}
		if !mode.Valid() {
			return lk.ErrInvalidArguments
		}
		if err := checkTTL(ttl); err != nil {
			return err
		}
		c, registered, err := repo.ClientGet(tx, client)
		if err != nil {
			return err
		}
		if registered {
			if c.WaitingFor != "" {
				return lk.ErrClientBusy
			}
			holds, err := repo.LeaseExists(tx, lock, client)
			if err != nil {
				return err
			}
			if holds {
				return lk.ErrClientBusy
			}
		} else if _, err := repo.ClientRegister(tx, client, ts); err != nil {
			return err
		}
		res, err = s.acquire(tx, ts, client, lock, ttl, mode)
		return err
	})
	return res, err
}

func (s *Service) acquire(tx *repo.Tx, ts int64, client, lock string, ttl int64, mode lk.Mode) (lk.AcquireResult, error) {
	waiting, exists, err := repo.LockQueueLength(tx, lock)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	grant := func(token int64) (lk.AcquireResult, error) {
		l := repo.Lease{Lock: lock, Client: client, Mode: mode, Token: token,
			GrantedAt: ts, ExpiresAt: lk.AddTime(ts, ttl)}
		if err := repo.LeaseInsert(tx, l); err != nil {
			return lk.AcquireResult{}, err
		}
		s.noteExpiry(l.ExpiresAt)
		return lk.AcquireResult{Outcome: lk.Granted, Token: l.Token, ExpiresAt: l.ExpiresAt}, nil
	}
	if !exists {
		if err := repo.LockCreate(tx, lock); err != nil {
			return lk.AcquireResult{}, err
		}
		return grant(1)
	}
	if waiting == 0 {
		held, err := repo.LeaseHolderMode(tx, lock)
		if err != nil {
			return lk.AcquireResult{}, err
		}
		if lk.Compatible(held, mode) {
			token, err := repo.LockNextToken(tx, lock)
			if err != nil {
				return lk.AcquireResult{}, err
			}
			return grant(token)
		}
	}
	length, position, err := repo.LockEnqueue(tx, lock)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	if err := repo.QueueAppend(tx, repo.QueueEntry{Lock: lock, Position: position, Client: client,
		Mode: mode, TTL: ttl, QueuedAt: ts}); err != nil {
		return lk.AcquireResult{}, err
	}
	if err := repo.ClientSetWaiting(tx, client, lock); err != nil {
		return lk.AcquireResult{}, err
	}
	res := lk.AcquireResult{Outcome: lk.Queued, Position: length}
	return s.resolveDeadlocks(tx, ts, client, lock, res)
}
