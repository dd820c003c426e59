package service

import (
	"context"
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// The read-only operations answered apart from the write transactions
// (repo.DB.Read): the locks listing, status and the gauges' counts. They
// read the last committed state on a connection of their own, so a server
// serves them without queueing them behind its group commits, and they
// neither move the service's time nor retire lapsed leases. A lease that
// ended by ts but is not retired yet is left out, as a transaction at ts
// would have retired it. Where its retirement would also hand a lock over,
// status and the listing answer ErrNeedsTx rather than a state the
// contract never shows (waiters of a lock with no holder); the gauges count
// what they read.
//
// Like the other operations they take ts and the request; they run
// concurrently with everything else, Group included.

// ErrNeedsTx is a read's answer when it cannot be answered apart: the
// database has no read connection (a private in-memory one), or, for
// status, only a write transaction at ts knows the answer. The caller runs
// the operation's transactional form instead (Status, Locks, Counts).
var ErrNeedsTx = errors.New("service: this read needs a write transaction")

// ReadStatus is Status read apart, exactly what Status at ts answers. A
// client waiting for a lock one of whose holders' leases ended by ts is
// the exception: the retirement of that lease may grant it the lock or move
// it up the queue, so ReadStatus answers ErrNeedsTx.
func (s *Service) ReadStatus(ctx context.Context, ts int64, req lk.StatusRequest) (lk.StatusResult, error) {
	var out lk.StatusResult
	if err := req.Validate(); err != nil {
		return out, err
	}
	if !s.db.CanReadApart() {
		return out, ErrNeedsTx
	}
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		var err error
		if out, err = statusPage(tx, req, ts); err != nil {
			return err
		}
		return s.explainStatus(tx, ts, &out)
	})
	return out, err
}

// statusPage answers status at ts: in a write transaction after the lapses
// were retired (Status), or in a read one (ReadStatus).
func statusPage(tx *repo.Tx, req lk.StatusRequest, ts int64) (lk.StatusResult, error) {
	out := lk.StatusResult{Client: req.Client, Holds: []lk.Hold{}}
	head, err := repo.ClientHeadGet(tx, req.Client, ts)
	if err != nil || head.Age == 0 {
		return out, err // an unregistered client holds and awaits nothing (D1, D4.3)
	}
	if head.Unsettled {
		return out, ErrNeedsTx
	}
	out.Age = head.Age
	var more bool
	if out.Holds, more, err = repo.HoldsPage(tx, req.Client, req.After, req.Limit, ts); err != nil {
		return out, err
	}
	if more {
		out.Next = &out.Holds[len(out.Holds)-1].Lock
	}
	if head.WaitingFor != "" {
		out.Waiting = &lk.WaitingFor{Lock: head.WaitingFor}
		if !req.WithoutPosition {
			out.Waiting.Position, err = repo.QueueRank(tx, req.Client)
		}
	}
	return out, err
}

// ReadLocks is Locks read apart: a page of the locks with live leases or
// waiters at ts, exactly what Locks at ts answers. A page with a lock that
// has waiters and a lease that ended by ts is the exception, as for
// ReadStatus: the retirement of that lease hands the lock over, and
// ReadLocks answers ErrNeedsTx.
func (s *Service) ReadLocks(ctx context.Context, ts int64, req lk.LocksRequest) (lk.LocksResult, error) {
	out := lk.LocksResult{Locks: []lk.LockSummary{}}
	if err := req.Validate(); err != nil {
		return out, err
	}
	if !s.db.CanReadApart() {
		return out, ErrNeedsTx
	}
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		page, more, unsettled, err := repo.LocksLive(tx, req.Prefix, req.After, req.Limit, ts)
		if err == nil && unsettled {
			return ErrNeedsTx
		}
		if len(page) > 0 {
			out.Locks = page
		}
		if more {
			out.Next = &page[len(page)-1].Lock
		}
		return err
	})
	return out, err
}

// ReadCounts is Counts read apart: how many locks have live leases at ts
// and how many clients wait.
func (s *Service) ReadCounts(ctx context.Context, ts int64) (held, waiting int64, err error) {
	if !s.db.CanReadApart() {
		return 0, 0, ErrNeedsTx
	}
	err = s.db.Read(ctx, func(tx *repo.Tx) error {
		var err error
		held, waiting, err = repo.LiveCounts(tx, ts)
		return err
	})
	return held, waiting, err
}

// readInTx runs a validated read as an operation at ts (withTx), so that
// the leases that lapsed by ts are retired first: the shape of every read
// that has a read-apart twin (readApart).
func readInTx[T any](s *Service, ctx context.Context, ts int64, validate func() error, read func(tx *repo.Tx) (T, error)) (T, error) {
	var out T
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := validate(); err != nil {
			return err
		}
		var err error
		out, err = read(tx)
		return err
	})
	return out, err
}

// readApart runs a validated read apart from the committer, or answers
// ErrNeedsTx where the database cannot (CanReadApart) or read says so.
func readApart[T any](s *Service, ctx context.Context, validate func() error, read func(tx *repo.Tx) (T, error)) (T, error) {
	var out T
	if err := validate(); err != nil {
		return out, err
	}
	if !s.db.CanReadApart() {
		return out, ErrNeedsTx
	}
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		var err error
		out, err = read(tx)
		return err
	})
	return out, err
}
