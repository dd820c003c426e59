// Package engine is leasekeeper's runtime: it runs the rules of package
// service on the database of package repo. It holds what a running server
// needs and the rules do not decide: the transaction runner and group
// commit (runner.go, committer.go), the server's time, the lapse timer
// (lapse.go), the notifications between servers sharing a PostgreSQL
// database (peers.go), the event bus of GET /v1/events (bus.go), and
// blocked acquires with their wake-ups (wait.go).
//
// Engine is the running service, whose operations take no time: it reads
// its clock once per operation, in whole seconds that never run backwards.
// Direct (direct.go) runs the same rules synchronously at the instants its
// caller gives, with no goroutine of its own: `leasekeeper run` and the
// contract's tests.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/bare"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// Options configure Open.
type Options struct {
	// DB tunes how the database is opened (its synchronous setting).
	DB repo.Options
	// Rules configure the rules: quota, history, strict fencing, answers
	// that say why.
	Rules service.Config
	// Clock is the time source; nil means the real clock. On a database
	// with peers, when Clock is nil or TimeFromDatabase is set, ts comes
	// from the database's clock and Clock only sets timers.
	Clock Clock
	// TimeFromDatabase makes an engine on a database with peers take ts
	// from the database even with a Clock of its own (tests of skewed
	// clocks).
	TimeFromDatabase bool
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Observer, when set, is told about committed transactions and group
	// commits; when it is also an Auditor, it writes every transaction's
	// events ahead of its commit.
	Observer Observer
	// EventsBuffer is how many recent events the bus keeps for readers to
	// resume from and catch up with (0: DefaultEventsBuffer).
	EventsBuffer int
	// Mark is the high-water mark file (mark.go): the database is compared
	// with it at Open, which refuses one that went back, and it follows
	// every commit. Empty: none.
	Mark string
	// AcceptRollback makes Open accept a database behind its mark, moving
	// every counter past the mark.
	AcceptRollback bool
}

// Observer is told what the engine did, for metrics. Its methods must be
// quick and must not call the engine.
type Observer interface {
	// Committed gets what each committed transaction of this engine did,
	// in order.
	Committed(events []service.Event)
	// GroupCommitted gets each group commit, whether it committed or not.
	GroupCommitted(g GroupStats)
	// Ready gets each readiness verdict (ready.go): "" when ready, else
	// one of NotReadyReasons.
	Ready(reason string)
}

// GroupStats are what one group commit cost.
type GroupStats struct {
	Ops      int           // operations in the group
	Duration time.Duration // from its start to its commit's end
	// RoundTrips is how many the writer's connection made to the
	// database for the group (PostgreSQL, where a pipelined batch is one;
	// 0 on SQLite).
	RoundTrips int64
}

// Auditor is an Observer that keeps an audit log, written ahead of each
// commit: a transaction's lines reach the operating system before the
// transaction commits, so a kill of the process never leaves a committed
// change without its lines (its blocked acquires, and on PostgreSQL the
// other servers' waiters it wakes, are answered only after the commit).
type Auditor interface {
	Observer
	// Recover runs once, in Open, before the engine runs any transaction:
	// the place to settle what a previous run, killed between writing
	// lines and committing, left in doubt. committed tells whether the
	// transaction that did ws committed (service.AuditCommitted); known
	// is false when the database cannot tell.
	Recover(committed func(ctx context.Context, ws []service.Witness) (committed, known bool, err error))
	// Audit gets a transaction's events just before its COMMIT, and must
	// have written them out of this process before it returns.
	Audit(events []service.Event)
	// CommitFailed says that the COMMIT of the events last given to Audit
	// failed.
	CommitFailed(err error)
}

// Engine is the lock service running on one database. It is safe for
// concurrent use; its operations run in the committer's groups, or, for
// reads that allow it, apart from them.
type Engine struct {
	r     *runner
	com   *committer
	lapse *lapseTimer
	waits waits
	bus   *Bus
	ready *readiness
	obs   Observer
	log   *slog.Logger

	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	// draining is closed by Drain: blocked acquires answer at once.
	draining  chan struct{}
	drainOnce sync.Once
	loops     sync.WaitGroup
}

// Open opens the database at path (a SQLite file, repo.MemoryPath, or a
// postgres:// URL), creating and migrating it as needed, logs what it
// holds, and starts the engine's loops: the committer, the lapse timer,
// and on a database with peers (PostgreSQL), the listener for the other
// servers' notifications. The engine then owns the database: nothing else
// in this process may use it.
func Open(ctx context.Context, path string, opts Options) (*Engine, error) {
	r, err := openRunner(ctx, path, opts.DB, opts.Rules)
	if err != nil {
		return nil, err
	}
	e := &Engine{r: r, obs: opts.Observer, log: opts.Logger, draining: make(chan struct{}),
		waits: waits{subs: map[string][]*subscription{}}}
	if e.log == nil {
		e.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Mark != "" {
		if err := useMark(ctx, r, opts.Mark, opts.AcceptRollback, e.log.Warn); err != nil {
			r.close()
			return nil, err
		}
	}
	if err := logDatabase(ctx, e.log, r, path); err != nil {
		r.close()
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = realClock{}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.ready = &readiness{log: e.log, obs: opts.Observer, peers: r.peers != nil}
	e.com = &committer{r: r, clock: clock, log: e.log, obs: opts.Observer, ctx: e.ctx, ready: e.ready,
		calls: make(chan *pending, maxGroup), done: make(chan struct{}),
		dbClock: r.peers != nil && (opts.Clock == nil || opts.TimeFromDatabase), failed: e.waits.recheck}
	e.com.lastTS.Store(math.MinInt64)
	if ts, ok := r.clock(); ok {
		e.com.lastTS.Store(ts) // a clock stepped back across a restart does not run time backwards
	}
	e.lapse = &lapseTimer{r: r, com: e.com, log: e.log, kick: make(chan struct{}, 1)}
	e.com.ran = e.lapse.poke
	e.bus = newBus(opts.EventsBuffer, e.draining, func() int64 { return e.com.now().Unix() })
	r.numbered = !bare.Build
	if r.peers == nil {
		e.bus.reset(r.lastEventID())
	} else {
		e.bus.reset(-1) // until the listener reads the counter
	}
	f := &fanout{r: r, obs: opts.Observer, waits: &e.waits, bus: e.bus, lapse: e.lapse}
	r.hooks.committed = f.committed
	if a, ok := opts.Observer.(Auditor); ok && !bare.Build {
		a.Recover(r.auditCommitted)
		r.hooks.prepare, r.hooks.prepareFailed = a.Audit, a.CommitFailed
	}
	e.loops.Add(2)
	go func() { defer e.loops.Done(); e.lapse.loop(e.ctx) }()
	go func() { defer e.loops.Done(); e.com.loop() }()
	if r.peers != nil {
		e.loops.Add(1)
		go func() { defer e.loops.Done(); f.listen(e.ctx) }()
	}
	return e, nil
}

// Drain makes blocked acquires answer at once with their current state,
// and event streams end, for a graceful shutdown: call it, let the HTTP
// server finish its requests, then Close.
func (e *Engine) Drain() { e.drainOnce.Do(func() { close(e.draining) }) }

// Close drains, stops the loops, answers operations still waiting for the
// committer with ErrClosed, and closes the database.
func (e *Engine) Close() error {
	e.Drain()
	e.cancel()
	e.loops.Wait()
	for {
		select {
		case c := <-e.com.calls:
			c.err = ErrClosed
			close(c.done)
		default:
			return e.r.close()
		}
	}
}

// rule is one operation's decision, a function of package service.
type rule[Q, R any] func(op *service.Op, q Q) (R, error)

// call runs fn on q at the server's time in the next group commit, and
// returns its result once the group is durable.
func call[Q, R any](e *Engine, ctx context.Context, name string, q Q, fn rule[Q, R]) (R, error) {
	return callAhead(e, ctx, name, nil, q, fn)
}

// callAhead is call for an operation whose first read, ahead(q), is sent
// ahead with its group's first round trip where a round trip is what an
// operation costs: on a database with peers (PostgreSQL).
func callAhead[Q, R any](e *Engine, ctx context.Context, name string, ahead func(Q) repo.Warm, q Q, fn rule[Q, R]) (R, error) {
	var w repo.Warm
	if ahead != nil && e.r.peers != nil {
		w = ahead(q)
	}
	var res R
	err := e.com.submitAhead(ctx, name, w, func(ctx context.Context, ts int64) error {
		var err error
		res, err = exec(e.r, ctx, ts, q, fn)
		return err
	})
	return res, err
}

// exec runs fn on q as one operation at ts.
func exec[Q, R any](r *runner, ctx context.Context, ts int64, q Q, fn rule[Q, R]) (R, error) {
	var res R
	err := r.do(ctx, ts, func(op *service.Op) error {
		var err error
		res, err = fn(op, q)
		return err
	})
	return res, err
}

// query runs the read fn on q apart from the committer, at the server's
// time; where only an operation knows the answer (service.ErrNeedsTx), it
// runs it in the next group instead. A read apart sees every group
// committed before it: every answered write was committed before its
// answer, so a client reads its own writes.
func query[Q, R any](e *Engine, ctx context.Context, name string, q Q, fn rule[Q, R]) (R, error) {
	var res R
	err := e.r.apart(ctx, e.com.readTS(), func(op *service.Op) error {
		var err error
		res, err = fn(op, q)
		return err
	})
	if errors.Is(err, service.ErrNeedsTx) {
		return call(e, ctx, name, q, fn)
	}
	return res, err
}

// Acquire asks for a lock (docs/api.md, acquire). With a wait, a request
// that is queued blocks until it is granted, aborted as a deadlock victim or
// withdrawn, until the wait runs out (the answer is then "queued", with the
// client still in the queue), or until the engine drains.
func (e *Engine) Acquire(ctx context.Context, q lk.AcquireRequest, wait time.Duration) (lk.AcquireResult, error) {
	var news *subscription
	if wait > 0 {
		// Subscribe before the acquire so that no grant can slip between.
		var done func()
		news, done = e.waits.subscribe(q.Client, q.Lock)
		defer done()
	}
	ahead := func(q lk.AcquireRequest) repo.Warm { return service.AcquireAhead(&e.r.cfg, q) }
	res, err := callAhead(e, ctx, "acquire", ahead, q, service.Acquire)
	if err == nil && wait > 0 && res.Outcome == lk.Queued {
		res, err = await(e, ctx, q.Client, q.Lock, wait, news, res)
		if err != nil && !errors.Is(err, context.Canceled) {
			// The acquire was committed (its client is queued, and may be
			// granted yet): what failed is the wait, so the answer must
			// not say that the operation did not happen.
			err = fmt.Errorf("%w (%w)", err, ErrOutcomeUnknown)
		}
	}
	return res, err
}

// Renew renews a lease (L2).
func (e *Engine) Renew(ctx context.Context, q lk.RenewRequest) (lk.RenewResult, error) {
	return call(e, ctx, "renew", q, service.Renew)
}

// Release releases a lease or withdraws a queued request (L7).
func (e *Engine) Release(ctx context.Context, q lk.ReleaseRequest) (lk.ReleaseResult, error) {
	return callAhead(e, ctx, "release", service.ReleaseAhead, q, service.Release)
}

// Holds reports whether client holds a live lease on lock, or, with
// orWaits, waits for it, read apart (service.Holds): what a renew or a
// release by a principal over its rate must find to be let through.
func (e *Engine) Holds(ctx context.Context, client, lock string, orWaits bool) (bool, error) {
	return query(e, ctx, "holds", service.HoldsQuery{Client: client, Lock: lock, OrWaits: orWaits}, service.Holds)
}

// Revoke ends a client's lease as a release by it would.
func (e *Engine) Revoke(ctx context.Context, q lk.RevokeRequest) (lk.RevokeResult, error) {
	return call(e, ctx, "revoke", q, service.Revoke)
}

// Writer is who writes to the fenced store: the client ids it may act as,
// its principal and that principal's bound (service.Writer).
type Writer = service.Writer

// Write writes to the fenced store (L6) as w (service.WriteAs).
func (e *Engine) Write(ctx context.Context, q lk.WriteRequest, w Writer) (lk.WriteResult, error) {
	return call(e, ctx, "write", q, func(op *service.Op, q lk.WriteRequest) (lk.WriteResult, error) {
		return service.WriteAs(op, q, w)
	})
}

// Delete removes a key from the fenced store, fenced as a write (L6).
func (e *Engine) Delete(ctx context.Context, q lk.DeleteRequest) (lk.DeleteResult, error) {
	return call(e, ctx, "delete", q, service.Delete)
}

// StoreClear removes every value of a lock's fenced store, an
// administrator's clean-up.
func (e *Engine) StoreClear(ctx context.Context, q lk.StoreClearRequest) (lk.StoreClearResult, error) {
	return call(e, ctx, "store_clear", q, service.StoreClear)
}

// ReportStale records that a fence in a job's own database refused a
// token (package fence, POST /v1/stale).
func (e *Engine) ReportStale(ctx context.Context, q lk.StaleRequest) (lk.StaleResult, error) {
	return call(e, ctx, "stale", q, service.ReportStale)
}

// Unfence sets a lock's fence back to its last issued token.
func (e *Engine) Unfence(ctx context.Context, q lk.UnfenceRequest) (lk.UnfenceResult, error) {
	return call(e, ctx, "unfence", q, service.Unfence)
}

// Read reads the fenced store.
func (e *Engine) Read(ctx context.Context, q lk.ReadRequest) (lk.ReadResult, error) {
	return call(e, ctx, "read", q, service.Read)
}

// Inspect returns a lock's holders and queue (S4).
func (e *Engine) Inspect(ctx context.Context, q lk.InspectRequest) (lk.InspectResult, error) {
	return call(e, ctx, "inspect", q, service.Inspect)
}

// Status returns a client's age, leases and wait (D6), read apart.
func (e *Engine) Status(ctx context.Context, q lk.StatusRequest) (lk.StatusResult, error) {
	return query(e, ctx, "status", q, service.Status)
}

// Locks lists a page of the locks with holders or waiters, read apart.
func (e *Engine) Locks(ctx context.Context, q lk.LocksRequest) (lk.LocksResult, error) {
	return query(e, ctx, "locks", q, service.Locks)
}

// History returns a page of the grant history, read apart.
func (e *Engine) History(ctx context.Context, q lk.HistoryRequest) (lk.HistoryResult, error) {
	return query(e, ctx, "history", q, service.History)
}

// Store returns a page of a lock's fenced store, read apart.
func (e *Engine) Store(ctx context.Context, q lk.StoreRequest) (lk.StoreResult, error) {
	return query(e, ctx, "store", q, service.Store)
}

// Graph returns the wait-for graph around a lock or a client, read apart.
func (e *Engine) Graph(ctx context.Context, q lk.GraphRequest) (lk.GraphResult, error) {
	return query(e, ctx, "graph", q, service.Graph)
}

// Gauges reads what the metrics show of the database now, apart from the
// committer, which it never holds up (service.ReadGauges).
func (e *Engine) Gauges(ctx context.Context) (service.Gauges, error) {
	return query(e, ctx, "gauges", struct{}{}, func(op *service.Op, _ struct{}) (service.Gauges, error) {
		return service.ReadGauges(op)
	})
}

// Clock returns the last time an operation ran at; ok is false before the
// first.
func (e *Engine) Clock() (ts int64, ok bool) {
	ts = e.com.lastTS.Load()
	return ts, ts != math.MinInt64
}

// ServiceID is the service's identity, created with its database: GET
// /v1/health's service_id, the key under which package fence keeps this
// service's tokens (docs/fencing.md). Every server on one PostgreSQL
// database has the same.
func (e *Engine) ServiceID() string { return e.r.id }

// NextLapse is when the lapse timer next looks for leases that ran out: a
// time at or before the earliest expiry this engine knows of
// (math.MaxInt64: none). On PostgreSQL it includes the leases other
// servers granted or renewed, once their notifications arrived.
func (e *Engine) NextLapse() int64 { return e.r.nextExpiry() }

// Events is the event bus, for the readers of GET /v1/events.
func (e *Engine) Events() *Bus { return e.bus }

// logDatabase logs, once at start, the figures that never go down while
// the database is intact: its clock, the locks it knows and the highest
// token issued. An operator comparing them with the previous start sees a
// database that went back (a -wal lost after a crash, an old copy
// restored: docs/deployment.md), which SQLite accepts silently.
func logDatabase(ctx context.Context, log *slog.Logger, r *runner, path string) error {
	var sum service.Summary
	err := r.readOnly(ctx, func(tx *repo.Tx) error {
		var err error
		sum, err = service.ReadSummary(tx)
		return err
	})
	if err != nil {
		return err
	}
	where := slog.String("file", path)
	if repo.IsPostgres(path) {
		where = slog.String("database", repo.Redacted(path))
	}
	clock, clockUTC := slog.String("clock", "none"), slog.String("clock_utc", "none")
	if sum.ClockSet {
		clock = slog.Int64("clock", sum.Clock)
		clockUTC = slog.String("clock_utc", time.Unix(sum.Clock, 0).UTC().Format(time.RFC3339))
	}
	log.Info("database", where, clock, clockUTC, slog.Int64("locks", sum.Locks), slog.Int64("highest_token", sum.HighestToken))
	return nil
}
