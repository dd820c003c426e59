package service

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Renew sets client's lease on lock to end at ts+ttl, keeping its token (L2).
// It returns lk.ErrInvalidTTL for a ttl out of range, and lk.ErrNotHolder when
// client holds no live lease on lock.
func (s *Service) Renew(ctx context.Context, ts int64, client, lock string, ttl int64) (lk.Lease, error) {
	var out lk.Lease
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(client, lock); err != nil {
			return err
		}
		if err := checkTTL(ttl); err != nil {
			return err
		}
		exp := lk.AddTime(ts, ttl)
		token, found, err := repo.LeaseRenew(tx, lock, client, exp)
		if err != nil {
			return err
		}
		if !found {
			return lk.ErrNotHolder
		}
		s.noteExpiry(exp)
		out = lk.Lease{Token: token, ExpiresAt: exp}
		return nil
	})
	return out, err
}

// Release ends client's lease on lock now (lk.Released), or takes a waiting
// client out of the lock's queue (lk.Withdrawn); either way S3 then runs at ts
// (L7). Anyone else gets lk.ErrNotHolder.
func (s *Service) Release(ctx context.Context, ts int64, client, lock string) (lk.ReleaseOutcome, error) {
	var out lk.ReleaseOutcome
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(client, lock); err != nil {
			return err
		}
		deleted, err := repo.LeaseDelete(tx, lock, client)
		if err != nil {
			return err
		}
		if deleted {
			out = lk.Released
			_, err = s.promote(tx, lock, ts)
			return err
		}
		c, registered, err := repo.ClientGet(tx, client)
		if err != nil {
			return err
		}
		if !registered || c.WaitingFor != lock {
			return lk.ErrNotHolder
		}
		if _, _, err := repo.QueueDeleteClient(tx, client); err != nil {
			return err
		}
		if err := repo.LockDequeue(tx, lock); err != nil {
			return err
		}
		if err := repo.ClientSetWaiting(tx, client, ""); err != nil {
			return err
		}
		out = lk.Withdrawn
		_, err = s.promote(tx, lock, ts)
		return err
	})
	return out, err
}

// Inspect returns lock's holders and queue (S4); a lock nobody has used has
// neither.
func (s *Service) Inspect(ctx context.Context, ts int64, lock string) (lk.Inspection, error) {
	var out lk.Inspection
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(lock); err != nil {
			return err
		}
		var err error
		if out.Holders, err = repo.LeasesOfLock(tx, lock); err != nil {
			return err
		}
		out.Queue, err = repo.QueueOfLock(tx, lock)
		return err
	})
	return out, err
}

// Status returns client's age, leases by lock name and the lock it waits for
// (D6); an unregistered client has age 0 and nothing else.
func (s *Service) Status(ctx context.Context, ts int64, client string) (lk.ClientStatus, error) {
	out := lk.ClientStatus{Holds: []lk.Hold{}}
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(client); err != nil {
			return err
		}
		c, registered, err := repo.ClientGet(tx, client)
		if err != nil || !registered {
			return err
		}
		out.Age, out.Waiting = c.Age, c.WaitingFor
		out.Holds, err = repo.LeasesOfClient(tx, client)
		return err
	})
	return out, err
}
