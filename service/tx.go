package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// How operations map to transactions: one each (withTx), many in one
// (Group, the server's group commit; Batch, a replay on PostgreSQL), and on
// a database with peers, the lock that serializes every server's
// transactions. The rules themselves never see which.

// withTx runs fn as one operation at time ts: it checks and advances the
// clock, retires lapsed leases, then calls fn. The transaction commits when fn
// succeeds or returns a contract error (a result, after which the time advance
// and the lapses stand), and rolls back on any other error or a panic.
func (s *Service) withTx(ctx context.Context, ts int64, fn func(tx *repo.Tx) error) (err error) {
	// A cancelled caller starts nothing new; an operation that has started
	// runs to completion. Its statements get a context without cancellation:
	// half an operation is never useful, and database/sql watches a
	// cancellable context at every statement, which cost about 30% of a
	// replay's time.
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	grouped := s.group != nil
	tx := s.group
	if !grouped {
		if s.peers {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, txDeadline)
			defer cancel() // after the deferred rollback below
		}
		s.events = s.events[:0]
		if tx, err = s.begin(ctx); err != nil {
			return err
		}
	}
	if s.c.ClockSet && ts < s.c.Clock && !failpoint.Enabled(failpoint.TimeBackwards) {
		if !grouped {
			tx.Rollback()
		}
		return ErrTimeBackwards
	}
	// A savepoint lets a failed operation undo only itself. On PostgreSQL
	// it costs two round trips, a third of an operation's: there a failed
	// operation fails its whole group instead (groupFailed), and the
	// operations need none. (An operation fails only when the database
	// does, or on a bug: contract errors are results, and a lost
	// connection loses the transaction anyway.)
	savepoint := grouped && !s.peers
	if savepoint {
		if err = tx.Savepoint(); err != nil {
			return err
		}
	}
	start, startEvents := s.c, len(s.events)
	s.unregister = false
	s.explained = startEvents
	done := false
	defer func() {
		if !done {
			// Undo the in-memory state with the transaction; an unknown
			// nextExpiry only costs one lapse query later.
			if savepoint {
				tx.RollbackToSavepoint()
			} else if grouped && s.groupFailed == nil {
				s.groupFailed = err
				if err == nil {
					s.groupFailed = errors.New("an operation panicked")
				}
			} else if !grouped {
				tx.Rollback()
			}
			s.c, s.nextExpiry, s.events = start, math.MinInt64, s.events[:startEvents]
		}
	}()
	s.c.Clock, s.c.ClockSet = ts, true
	if err := s.retire(tx, ts); err != nil {
		return err
	}
	if err := s.pruneHistory(tx, ts); err != nil {
		return err
	}
	if err = fn(tx); err != nil && !lk.IsContract(err) {
		return err
	}
	if xerr := s.explainGrants(tx); xerr != nil {
		return xerr
	}
	if s.eventIDs {
		s.numberEvents(startEvents)
	}
	// On a database with peers, the service row must be exact: nobody there reads the
	// clients table for the counter.
	if s.c.Clock != start.Clock || !start.ClockSet || s.unregister || s.rowChanged(start) {
		if grouped {
			s.groupDirty = true // closeGroup writes it
		} else if err := repo.ServiceCountersSet(tx, s.c); err != nil {
			return err
		}
	}
	if grouped {
		// Durable, and announced, only when the group commits.
		if savepoint {
			if rerr := tx.ReleaseSavepoint(); rerr != nil {
				return rerr
			}
		}
		done = true
		return err
	}
	if perr := s.publish(tx); perr != nil {
		return perr
	}
	s.prepared()
	if cerr := tx.Commit(); cerr != nil {
		s.commitFailed(cerr)
		return cerr
	}
	done = true
	if s.onCommit != nil && len(s.events) > 0 {
		s.onCommit(s.events)
	}
	return err
}

// begin starts a transaction. On a database with peers it first takes the lock
// that serializes every transaction of every process (repo.Lock) and reloads
// what other processes may have changed since this one's last transaction.
func (s *Service) begin(ctx context.Context) (*repo.Tx, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil || !s.peers {
		return tx, err
	}
	c, now, err := repo.Lock(tx)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	s.c, s.dbNow, s.nextExpiry = c, now, math.MinInt64
	return tx, nil
}

// Group runs fn, and every operation on s while fn runs, in one transaction:
// each operation in its own savepoint (so a failing one undoes only itself;
// on PostgreSQL, without savepoints, it fails the group), one commit and one
// sync to disk for all of them. This is group commit: the
// caller must answer none of those operations before Group returns nil. If
// the commit fails, every one of them is undone and Group returns the error.
// Events reach OnCommit after the commit. Operations must not run concurrently
// with Group from other goroutines that expect their own commit.
func (s *Service) Group(ctx context.Context, fn func()) (err error) {
	ctx = context.WithoutCancel(ctx) // as in withTx
	if err := s.openGroup(ctx); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			s.closeGroup(false) // fn panicked
		}
	}()
	fn()
	committed = true
	return s.closeGroup(true)
}

// errGroupFailed is Group's error when one of its operations failed on a
// database where that fails them all.
var errGroupFailed = errors.New("service: an operation of the group failed, so none of it was committed")

// txDeadline bounds a transaction on a database with peers, lock wait (2 s at
// most, repo.ServiceLockTimeout) included. Past it the statement under way is cut
// off with its connection, and the transaction fails as unavailable: a
// database that stalls (a synchronous standby gone, a network that drops
// packets) must not hold the server, nor everything queued behind it.
const txDeadline = 15 * time.Second

// openGroup starts the transaction of a Group.
func (s *Service) openGroup(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group != nil {
		return errors.New("service: Group inside Group")
	}
	cancel := context.CancelFunc(func() {})
	if s.peers {
		ctx, cancel = context.WithTimeout(ctx, txDeadline)
	}
	tx, err := s.begin(ctx)
	if err != nil {
		cancel()
		return err
	}
	s.groupCancel = cancel
	s.group, s.groupStart, s.events = tx, s.c, s.events[:0]
	s.groupDirty, s.groupFailed = false, nil
	return nil
}

// closeGroup commits (or, with commit false, rolls back) the open Group's
// transaction; a failed commit rolls back too. The service row is written
// here, once for the whole group: rewriting one row at every operation of a
// long transaction costs PostgreSQL a longer chain of row versions each time.
func (s *Service) closeGroup(commit bool) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := s.group
	if tx == nil {
		return nil
	}
	s.group = nil
	defer s.groupCancel()
	if commit && s.groupFailed != nil {
		err = fmt.Errorf("%w: %w", errGroupFailed, s.groupFailed)
	}
	if commit && err == nil {
		if s.groupDirty {
			err = repo.ServiceCountersSet(tx, s.c)
		}
		if err == nil {
			err = s.publish(tx)
		}
		if err == nil {
			s.prepared()
			if err = tx.Commit(); err != nil {
				s.commitFailed(err)
			}
		}
	}
	if !commit || err != nil {
		tx.Rollback()
		s.c, s.nextExpiry, s.events = s.groupStart, math.MinInt64, s.events[:0]
		return err
	}
	if s.onCommit != nil && len(s.events) > 0 {
		s.onCommit(s.events)
	}
	return nil
}
