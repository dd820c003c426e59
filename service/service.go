// Package service holds leasekeeper's rules (docs/contract.md sections 2-4).
// It takes the typed requests of package leasekeeper and returns their typed
// results. Each operation runs in one transaction and takes its time, ts, as
// an argument: nothing here reads a clock. Before an operation is handled,
// every lease that lapsed by ts is retired and handed over at the instant it
// ended (L1, L3).
//
// The files split what changes for different reasons: the rules (acquire.go,
// lease.go, lapse.go, deadlock.go, store.go), how operations map to
// transactions (tx.go), what committed transactions report (events.go), and
// what servers sharing a PostgreSQL database tell each other (peers.go).
//
// It is part of leasekeeper's implementation, not meant for import by other
// modules: its API is not stable. Programs use package leasekeeper's types and
// package client.
package service

import (
	"context"
	"fmt"
	"math"
	"sync"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Service is the lock service on one database. It is safe for concurrent use;
// operations are serialized, each in its own transaction.
type Service struct {
	mu sync.Mutex
	db *repo.DB
	// c mirrors the service row: the current time (docs/contract.md rule 5) and the
	// registration counter (D1). It is written back at the end of a
	// transaction that moved the clock or unregistered a client (only then
	// can the counter exceed the ages left in the clients table).
	c          repo.Counters
	unregister bool
	// events collects what the current transaction did to waiting clients;
	// onCommit receives them after it commits.
	events   []Event
	onCommit func([]Event)
	// onPrepare and onPrepareFailed write the events ahead of the commit
	// (OnPrepare).
	onPrepare       func([]Event)
	onPrepareFailed func(error)
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

	// peers: other servers use the database too (PostgreSQL). Then c and
	// nextExpiry are read afresh at the start of every transaction, under
	// the lock that serializes all of them (repo.Lock), and dbNow is the
	// database's clock read there.
	peers  bool
	dbNow  float64
	origin string // tells this process's notifications from the others'

	quota StoreQuota // what Write lets a lock's store hold
	// history bounds the grants table (history.go); historyPruneAt is the
	// clock at which pruneHistory next looks for rows past history.Days.
	history        HistoryRetention
	historyPruneAt int64
	// strict: Write accepts only tokens granted for the lock (Options.StrictFencing).
	strict bool
	// eventIDs: events are numbered, and on a database with peers all of
	// them are published (NumberEvents); eventSink receives them from
	// Listen (OnEvents).
	eventIDs  bool
	eventSink func(events []Event, resync bool, cursor int64)
	// explain: answers say why (Options.Explain, explain.go); explained
	// is how many of events have had their grants explained.
	explain   bool
	explained int
}

// Options configure Open.
type Options struct {
	repo.Options
	// StoreQuota bounds the fenced store per lock (quota.go); the zero
	// value, the contract's, bounds nothing.
	StoreQuota StoreQuota
	// History bounds the grant history (history.go); the zero value keeps
	// the defaults.
	History HistoryRetention
	// StrictFencing makes Write refuse, as lk.ErrTokenNotGranted, a token
	// higher than the lock's last issued one (serve --strict-fencing). The
	// zero value keeps the contract's L6, which accepts any token at least
	// the highest accepted, granted or not.
	StrictFencing bool
	// Explain makes answers say why (explain.go, docs/api.md): grants name
	// their predecessors, a deadlock victim's status its abort, and
	// waiters get an estimated wait (serve turns it on). It costs a few
	// indexed reads per grant and per queued request, which the
	// contract's harness (leasekeeper run) does without: its answers are
	// the contract's tuples, which show none of it.
	Explain bool
}

// Open opens the service on the database at path: a SQLite file,
// repo.MemoryPath for a private in-memory one, or a postgres:// URL
// (repo.IsPostgres), creating and migrating it as needed.
func Open(ctx context.Context, path string, opts Options) (*Service, error) {
	db, err := repo.Open(ctx, path, opts.Options)
	if err != nil {
		return nil, err
	}
	s := &Service{db: db, nextExpiry: math.MinInt64, peers: db.HasPeers(), quota: opts.StoreQuota,
		history: opts.History, historyPruneAt: math.MinInt64,
		strict:  opts.StrictFencing,
		explain: opts.Explain}
	if s.peers {
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
// operation. On a database with peers, outside a Group, it reads the database:
// other processes may have moved the time since this one last looked.
func (s *Service) Clock() (ts int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.peers && s.group == nil {
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

// NextExpiry returns a time at or before the earliest expires_at of all
// leases (math.MaxInt64 when there are none): when to call Advance so that
// lapses are retired on time. It may be early; an Advance then finds nothing
// and the next call answers exactly.
func (s *Service) NextExpiry() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextExpiry
}

// Locks lists a page of the locks that have holders or waiters, by name,
// at ts.
func (s *Service) Locks(ctx context.Context, ts int64, req lk.LocksRequest) (lk.LocksResult, error) {
	out := lk.LocksResult{Locks: []lk.LockSummary{}}
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		page, more, err := repo.LocksActive(tx, req.Prefix, req.After, req.Limit, ts)
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
	Rank       int64          // its place in that lock's queue (1 = next); 0 when not queued for it
	Hold       *repo.LeaseRow // its lease on the lock, when it holds one
	Registered bool           // false after it was aborted (D4) or before it ever acquired
	// With Options.Explain (explain.go): the predecessors of Hold, the
	// estimated wait at Rank, and the abort that unregistered the client.
	Predecessors  []lk.Predecessor
	EstimatedWait *float64
	Aborted       *lk.Abort
}

// WaitState tells at ts how the wait of client for lock came out, or that it
// goes on: for a blocked acquire whose wait ran out, or whose news may have
// been lost (another server's notification). It reads only that client's
// registration, its lease on lock and its queue entry.
func (s *Service) WaitState(ctx context.Context, ts int64, client, lock string) (WaitState, error) {
	var w WaitState
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		var err error
		if w.Registered, err = repo.ClientRegistered(tx, client); err != nil || !w.Registered {
			if err == nil && s.explain {
				w.Aborted, err = lastAbort(tx, client)
			}
			return err
		}
		l, held, err := repo.LeaseGet(tx, lock, client)
		if err != nil {
			return err
		}
		if held {
			w.Hold = &l
			if s.explain {
				w.Predecessors, err = repo.GrantPredecessors(tx, lock, l.Token, l.GrantedAt, l.Mode, maxPredecessors)
			}
			return err
		}
		waitingFor, err := repo.ClientWaitingFor(tx, client)
		if err != nil || waitingFor != lock {
			return err
		}
		if w.Rank, err = repo.QueueRank(tx, client); err != nil {
			return err
		}
		w.EstimatedWait, err = s.queuedEstimate(tx, ts, client, lock)
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
