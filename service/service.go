// Package service holds leasekeeper's rules (SPEC.md sections 2-4). Each
// operation runs in one transaction and takes its time, ts, as an argument:
// nothing here reads a clock. Before an operation is handled, every lease that
// lapsed by ts is retired and handed over at the instant it ended (L1, L3).
package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Service is the lock service on one database. It is safe for concurrent use;
// operations are serialized, each in its own transaction.
type Service struct {
	mu sync.Mutex
	db *repo.DB
	// c mirrors the service row: the current time (SPEC.md rule 5) and the
	// registration counter (D1). It is written back at the end of a
	// transaction that moved the clock or unregistered a client (only then
	// can the counter exceed the ages left in the clients table).
	c          repo.Counters
	unregister bool
	// events collects what the current transaction did to waiting clients;
	// notify receives them after it commits.
	events []Event
	notify func([]Event)
	// group is the open transaction of Group, nil outside one; groupStart
	// is the in-memory state to restore if its commit fails.
	group      *repo.Tx
	groupStart repo.Counters
	groupDirty bool // the service row is to be written at the group's commit
	// groupCancel ends the deadline of the group's transaction.
	groupCancel context.CancelFunc
	// groupFailed is the error of an operation of the group that failed
	// with no savepoint to undo it alone: the group must not commit.
	// (PostgreSQL answers the COMMIT of a transaction that a failed
	// statement aborted with a silent rollback.)
	groupFailed error
	// nextExpiry is a lower bound on the earliest expires_at of all leases,
	// so that operations skip the lapse query when nothing can have lapsed.
	// math.MinInt64 means unknown.
	nextExpiry int64

	// shared: other processes use the database too (PostgreSQL). Then c and
	// nextExpiry are read afresh at the start of every transaction, under
	// the lock that serializes all of them (repo.Lock), and dbNow is the
	// database's clock read there.
	shared bool
	dbNow  float64
	origin string // tells this process's notifications from the others'
}

// Options configure Open.
type Options struct {
	repo.Options
}

// Open opens the service on the database at path: a SQLite file,
// repo.MemoryPath for a private in-memory one, or a postgres:// URL
// (repo.IsPostgres), creating and migrating it as needed.
func Open(ctx context.Context, path string, opts Options) (*Service, error) {
	db, err := repo.Open(ctx, path, opts.Options)
	if err != nil {
		return nil, err
	}
	s := &Service{db: db, nextExpiry: math.MinInt64, shared: db.Shared()}
	if s.shared {
		s.origin = newOrigin()
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.c, err = repo.ServiceCounters(tx)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Close()
}

// CollectStats starts counting the time of every SQL statement; Stats
// returns the counts (see repo.DB.CollectStats).
func (s *Service) CollectStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.db.CollectStats()
}

// Stats returns the statement counts since CollectStats, most time first.
func (s *Service) Stats() []repo.StatementStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Stats()
}

// Clock returns the service's current time; ok is false before the first
// operation. On a shared database, outside a Group, it reads the database:
// other processes may have moved the time since this one last looked.
func (s *Service) Clock() (ts int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shared && s.group == nil {
		if tx, err := s.db.Begin(context.Background()); err == nil {
			if c, err := repo.ServiceCounters(tx); err == nil {
				s.c.Clock, s.c.ClockSet = c.Clock, c.ClockSet
			}
			tx.Rollback()
		}
	}
	return s.c.Clock, s.c.ClockSet
}

// ErrTimeBackwards is returned (wrapping lk.ErrInvalidArguments) by every
// operation whose ts is lower than the service's current time (rule 4).
var ErrTimeBackwards = fmt.Errorf("%w: time runs backwards", lk.ErrInvalidArguments)

// Advance moves the service's time to ts without any other operation (rule 5:
// an operation that fails validation after its ts was accepted still advances
// time).
func (s *Service) Advance(ctx context.Context, ts int64) error {
	return s.withTx(ctx, ts, func(*repo.Tx) error { return nil })
}

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
		if s.shared {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, txDeadline)
			defer cancel() // after the deferred rollback below
		}
		s.events = s.events[:0]
		if tx, err = s.begin(ctx); err != nil {
			return err
		}
	}
	if s.c.ClockSet && ts < s.c.Clock {
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
	savepoint := grouped && !s.shared
	if savepoint {
		if err = tx.Savepoint(); err != nil {
			return err
		}
	}
	start, startEvents := s.c, len(s.events)
	s.unregister = false
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
	if err = fn(tx); err != nil && !lk.IsContract(err) {
		return err
	}
	// A shared database's row must be exact: nobody there reads the
	// clients table for the counter.
	if s.c.Clock != start.Clock || !start.ClockSet || s.unregister || (s.shared && s.c != start) {
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
	if cerr := tx.Commit(); cerr != nil {
		return cerr
	}
	done = true
	if s.notify != nil && len(s.events) > 0 {
		s.notify(s.events)
	}
	return err
}

// begin starts a transaction. On a shared database it first takes the lock
// that serializes every transaction of every process (repo.Lock) and reloads
// what other processes may have changed since this one's last transaction.
func (s *Service) begin(ctx context.Context) (*repo.Tx, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil || !s.shared {
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
// Events reach Notify after the commit. Operations must not run concurrently
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

// txDeadline bounds a transaction on a shared database, lock wait (10 s at
// most, repo's lock_timeout) included. Past it the statement under way is cut
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
	if s.shared {
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
			err = tx.Commit()
		}
	}
	if !commit || err != nil {
		tx.Rollback()
		s.c, s.nextExpiry, s.events = s.groupStart, math.MinInt64, s.events[:0]
		return err
	}
	if s.notify != nil && len(s.events) > 0 {
		s.notify(s.events)
	}
	return nil
}

// EventKind says what happened.
type EventKind int

const (
	// EventGranted: a lease was granted, on the spot or (FromQueue) to a
	// waiter, starting at At.
	EventGranted EventKind = iota + 1
	// EventAborted: the client was aborted as a deadlock victim (D4); Cycle
	// holds the clients on cycles through the requester when it was chosen.
	EventAborted
	// EventWithdrawn: the client's queued request was withdrawn by a release.
	EventWithdrawn
	// EventRevoked: the client's lease was ended by Revoke.
	EventRevoked
	// EventLapsed: the client's lease with Token ran out at At (L1).
	EventLapsed
	// EventReleased: the holder released its lease.
	EventReleased
	// EventRenewed: the holder renewed; ExpiresAt is the new expiry.
	EventRenewed
	// EventStaleWrite: the fenced store refused a write with Token, lower
	// than Highest (L6).
	EventStaleWrite
	// EventQueued: the client joined the lock's queue at Position.
	EventQueued
)

// Event is something the service did, reported after its transaction
// committed: what a server needs to answer blocked acquires, count and log.
type Event struct {
	Kind      EventKind
	Client    string
	Lock      string
	At        int64 // the instant it happened (a hand-over's instant, not the noticing operation's ts)
	Token     int64
	ExpiresAt int64
	FromQueue bool     // EventGranted
	Cycle     []string // EventAborted
	Highest   int64    // EventStaleWrite
	// Position is the queue entry an event concerns (EventQueued, a
	// FromQueue EventGranted, EventWithdrawn, and EventAborted of a waiting
	// client), 0 for none. Positions are never reused on a lock, so a
	// blocked acquire tells the fate of its own wait from that of an
	// earlier wait of the same client.
	Position int64
}

// Notify sets the function that receives, after each committed transaction,
// the events it caused, in order. It runs with the service locked: it must
// not call the service.
func (s *Service) Notify(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = fn
}

// NextExpiry returns a time at or before the earliest expires_at of all
// leases (math.MaxInt64 when there are none): when to call Advance so that
// lapses are retired on time. It may be early; an Advance then finds nothing
// and the next call answers exactly.
func (s *Service) NextExpiry() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextExpiry
}

// Locks lists every lock that has holders or waiters, by name, at ts.
func (s *Service) Locks(ctx context.Context, ts int64) ([]lk.LockSummary, error) {
	var out []lk.LockSummary
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		var err error
		out, err = repo.LocksActive(tx)
		return err
	})
	return out, err
}

// Counts returns how many locks have holders and how many clients wait, at ts.
func (s *Service) Counts(ctx context.Context, ts int64) (held, waiting int64, err error) {
	err = s.withTx(ctx, ts, func(tx *repo.Tx) error {
		var err error
		held, waiting, err = repo.LocksCounts(tx)
		return err
	})
	return held, waiting, err
}

// WaitState is where a client that was queued for a lock stands now.
type WaitState struct {
	Rank       int64    // its place in that lock's queue (1 = next); 0 when not queued for it
	Hold       *lk.Hold // its lease on the lock, when it holds one
	Registered bool     // false after it was aborted (D4) or before it ever acquired
}

// WaitState tells at ts how the wait of client for lock came out, or that it
// goes on: for a blocked acquire whose wait ran out, or whose news may have
// been lost (another server's notification).
func (s *Service) WaitState(ctx context.Context, ts int64, client, lock string) (WaitState, error) {
	var w WaitState
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		st, err := repo.ClientView(tx, client)
		if err != nil {
			return err
		}
		w.Registered = st.Age != 0
		for i, h := range st.Holds {
			if h.Lock == lock {
				w.Hold = &st.Holds[i]
			}
		}
		if st.Waiting == lock && w.Registered {
			w.Rank, err = repo.QueueRank(tx, client)
		}
		return err
	})
	return w, err
}

// noteExpiry keeps nextExpiry a lower bound after a lease got expiry at.
func (s *Service) noteExpiry(at int64) {
	if at < s.nextExpiry {
		s.nextExpiry = at
	}
}

func checkTTL(ttl int64) error {
	if ttl < 1 || ttl > lk.MaxTTL {
		return lk.ErrInvalidTTL
	}
	return nil
}

func checkNames(names ...string) error {
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("%w: empty name", lk.ErrInvalidArguments)
		}
	}
	return nil
}
