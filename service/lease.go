package service

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Renew sets client's lease on lock to end at ts+ttl, keeping its token (L2).
// It returns lk.ErrInvalidTTL for a ttl out of range, and lk.ErrNotHolder when
// client holds no live lease on lock.
func (s *Service) Renew(ctx context.Context, ts int64, req lk.RenewRequest) (lk.RenewResult, error) {
	var out lk.RenewResult
	client, lock := req.Client, req.Lock
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		exp := lk.AddTime(ts, req.TTL)
		token, grantedAt, found, err := repo.LeaseRenew(tx, lock, client, exp)
		if err != nil {
			return err
		}
		if !found {
			if msg, err := s.abortedMessage(tx, client, lock); err != nil || msg != "" {
				if err != nil {
					return err
				}
				return lk.Errorf(lk.CodeNotHolder, msg)
			}
			return notHolder(client, lock)
		}
		s.noteExpiry(exp)
		s.events = append(s.events, Event{Kind: EventRenewed, Client: client, Lock: lock, At: ts,
			Token: token, ExpiresAt: exp})
		out = lk.RenewResult{Outcome: lk.Renewed, Token: token, GrantedAt: grantedAt, ExpiresAt: exp}
		return nil
	})
	return out, err
}

// Release ends client's lease on lock now (lk.Released), or takes a waiting
// client out of the lock's queue (lk.Withdrawn); either way S3 then runs at ts
// (L7). Anyone else gets lk.ErrNotHolder.
func (s *Service) Release(ctx context.Context, ts int64, req lk.ReleaseRequest) (lk.ReleaseResult, error) {
	var out lk.ReleaseResult
	client, lock := req.Client, req.Lock
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		l, deleted, err := repo.LeaseEnd(tx, lock, client, lk.EndReleased, ts)
		if err != nil {
			return err
		}
		if deleted {
			out.Outcome = lk.Released
			s.events = append(s.events, Event{Kind: EventReleased, Client: client, Lock: lock, At: ts,
				Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: l.Mode})
			err = s.promote(tx, lock, ts)
			return err
		}
		waitingFor, err := repo.ClientWaitingFor(tx, client)
		if err != nil {
			return err
		}
		if waitingFor != lock {
			return lk.Errorf(lk.CodeNotHolder, client+" neither holds a live lease on "+lock+" nor waits for it")
		}
		e, _, err := repo.QueueTakeClient(tx, client)
		if err != nil {
			return err
		}
		if err := repo.LockDequeue(tx, lock); err != nil {
			return err
		}
		out.Outcome = lk.Withdrawn
		s.events = append(s.events, Event{Kind: EventWithdrawn, Client: client, Lock: lock, At: ts,
			Position: e.Position, Mode: e.Mode})
		err = s.promote(tx, lock, ts)
		return err
	})
	return out, err
}

// Revoke ends client's live lease on lock now, as a release by the holder
// would: the lock is handed over at ts (L3, S3) and the next grant's higher
// token fences out the revoked holder. It returns lk.ErrNotHolder when client
// holds no live lease on lock. Who may revoke is the server's business.
func (s *Service) Revoke(ctx context.Context, ts int64, req lk.RevokeRequest) (lk.RevokeResult, error) {
	client, lock := req.Client, req.Lock
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		l, deleted, err := repo.LeaseEnd(tx, lock, client, lk.EndRevoked, ts)
		if err != nil {
			return err
		}
		if !deleted {
			return notHolder(client, lock)
		}
		s.events = append(s.events, Event{Kind: EventRevoked, Client: client, Lock: lock, At: ts,
			Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: l.Mode})
		return s.promote(tx, lock, ts)
	})
	if err != nil {
		return lk.RevokeResult{}, err
	}
	return lk.RevokeResult{Outcome: lk.Revoked}, nil
}

// notHolder is the error of a renew, release or revoke by a client without
// a live lease on lock.
func notHolder(client, lock string) error {
	return lk.Errorf(lk.CodeNotHolder, client+" holds no live lease on "+lock)
}

// Inspect returns lock's holders and queue (S4); a lock nobody has used has
// neither.
func (s *Service) Inspect(ctx context.Context, ts int64, req lk.InspectRequest) (lk.InspectResult, error) {
	var out lk.InspectResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		var err error
		if out, err = repo.LockView(tx, req.Lock); err != nil {
			return err
		}
		return s.explainQueue(tx, ts, &out)
	})
	return out, err
}

// Status returns client's age, leases by lock name and the lock it waits for
// (D6); an unregistered client has age 0 and nothing else. With a Limit or
// an After, the leases are a page of them (read.go).
func (s *Service) Status(ctx context.Context, ts int64, req lk.StatusRequest) (lk.StatusResult, error) {
	var out lk.StatusResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		var err error
		if req.Limit != 0 || req.After != "" {
			out, err = statusPage(tx, req, ts)
		} else {
			out, err = repo.ClientView(tx, req.Client, !req.WithoutPosition)
		}
		if err != nil {
			return err
		}
		return s.explainStatus(tx, ts, &out)
	})
	return out, err
}
