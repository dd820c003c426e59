package service

import (
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Release ends client's lease on lock now (lk.Released), or takes a waiting
// client out of the lock's queue (lk.Withdrawn); either way the lock is
// then handed over at op.Now (L7, S3). Anyone else gets lk.ErrNotHolder.
func Release(op *Op, req lk.ReleaseRequest) (lk.ReleaseResult, error) {
	if err := req.Validate(); err != nil {
		return lk.ReleaseResult{}, err
	}
	client, lock := req.Client, req.Lock
	tx, ts := op.Tx, op.Now
	l, waiting, deleted, err := repo.LeaseEnd(tx, lock, client, lk.EndReleased, ts)
	if err != nil {
		return lk.ReleaseResult{}, err
	}
	if deleted {
		op.emit(Event{Kind: lk.EventRelease, Client: client, Lock: lock, At: ts,
			Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: l.Mode})
		if waiting == 0 || failpoint.Enabled(failpoint.SkipHandover) {
			return lk.ReleaseResult{Outcome: lk.Released}, nil // nobody to hand over to
		}
		return lk.ReleaseResult{Outcome: lk.Released}, promote(op, lock, ts)
	}
	waitingFor, err := repo.ClientWaitingFor(tx, client)
	if err != nil {
		return lk.ReleaseResult{}, err
	}
	if waitingFor != lock {
		return lk.ReleaseResult{}, lk.Errorf(lk.CodeNotHolder, client+" neither holds a live lease on "+lock+" nor waits for it")
	}
	e, err := leaveQueue(tx, client, lock)
	if err != nil {
		return lk.ReleaseResult{}, err
	}
	op.emit(Event{Kind: lk.EventWithdraw, Client: client, Lock: lock, At: ts, Position: e.Position, Mode: e.Mode})
	return lk.ReleaseResult{Outcome: lk.Withdrawn}, promote(op, lock, ts)
}

// leaveQueue takes client's entry out of lock's queue without a grant (a
// withdrawal, a deadlock abort), and the lock's count of waiters down with
// it. A release trusts that count to skip its hand-over, so it moves only
// with an entry taken: a client that waits for lock without one (not
// reachable while its waiting_for and its entry change together) is an
// error.
func leaveQueue(tx *repo.Tx, client, lock string) (repo.QueueEntry, error) {
	e, found, err := repo.QueueTakeClient(tx, client)
	if err != nil {
		return e, err
	}
	if !found {
		return e, fmt.Errorf("%s waits for %s but has no queue entry", client, lock)
	}
	return e, repo.LockDequeue(tx, lock)
}

// ReleaseAhead is the first read Release makes for req, for the runtime
// to send ahead (repo.Warm): the lease and the lock's waiters' count.
func ReleaseAhead(req lk.ReleaseRequest) repo.Warm {
	if req.Validate() != nil {
		return repo.Warm{} // Release refuses it before any read
	}
	return repo.WarmLeaseEnd(req.Client, req.Lock)
}

// Revoke ends client's live lease on lock now, as a release by the holder
// would: the lock is handed over at op.Now (L3, S3) and the next grant's
// higher token fences out the revoked holder. It returns lk.ErrNotHolder
// when client holds no live lease on lock. Who may revoke is the server's
// business.
func Revoke(op *Op, req lk.RevokeRequest) (lk.RevokeResult, error) {
	if err := req.Validate(); err != nil {
		return lk.RevokeResult{}, err
	}
	client, lock := req.Client, req.Lock
	l, waiting, deleted, err := repo.LeaseEnd(op.Tx, lock, client, lk.EndRevoked, op.Now)
	if err != nil {
		return lk.RevokeResult{}, err
	}
	if !deleted {
		return lk.RevokeResult{}, notHolder(client, lock)
	}
	op.emit(Event{Kind: lk.EventRevoke, Client: client, Lock: lock, At: op.Now,
		Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: l.Mode})
	if waiting != 0 {
		if err := promote(op, lock, op.Now); err != nil {
			return lk.RevokeResult{}, err
		}
	}
	return lk.RevokeResult{Outcome: lk.Revoked}, nil
}
