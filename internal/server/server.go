// Package server serves the lock service over HTTP (docs/api.md). It reads
// its clock once per request, in whole Unix seconds that never run
// backwards, retires leases at their expiry with a timer (no request needs to
// arrive), and answers blocked acquires when their client is granted or
// aborted.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/service"
)

// Options configure a Server.
type Options struct {
	// Clock is the time source; nil means the real clock. On a database
	// with peers, when Clock is nil or TimeFromDatabase is set, ts comes from
	// the database's clock and Clock only sets timers.
	Clock Clock
	// TimeFromDatabase makes a server on a database with peers take ts from
	// the database even with a Clock of its own (tests of skewed clocks).
	TimeFromDatabase bool
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Authorizer judges every request; nil allows everything.
	Authorizer Authorizer
	// Metrics, when set, is served at GET /metrics (after the Authorizer).
	Metrics http.Handler
	// Observer, when set, is told about events, requests, commits and
	// refusals.
	Observer Observer
	// EventsBuffer is how many recent events GET /v1/events keeps for
	// readers to resume from and catch up with (0: DefaultEventsBuffer);
	// EventsKeepAlive how often a quiet stream gets a comment line (0:
	// DefaultEventsKeepAlive).
	EventsBuffer    int
	EventsKeepAlive time.Duration
}

// Server is the HTTP front of one service.
type Server struct {
	svc     *service.Service
	clock   Clock
	auth    Authorizer
	metrics http.Handler
	obs     Observer
	log     *slog.Logger
	mux     *http.ServeMux
	ctx     context.Context // ends with Close
	cancel  context.CancelFunc
	// draining is closed by Drain: blocked acquires answer at once.
	draining  chan struct{}
	drainOnce sync.Once
	loopWG    sync.WaitGroup
	kick      chan struct{} // the next expiry may have moved

	lastTS atomic.Int64 // the last ts used; never decreases
	calls  chan *call   // operations for the committer
	// committerDone is closed when the committer has stopped.
	committerDone chan struct{}

	// dbClock: time is the common database's clock (service.DatabaseTime),
	// not this machine's; offset is how far the database's clock was ahead
	// of this machine's at the last group, for setting the lapse timer.
	dbClock bool
	offset  atomic.Int64 // nanoseconds

	waitMu  sync.Mutex
	waiters map[string][]*subscription // blocked acquires by client

	actors actors // who last acted as each client id (audit.go)

	hub       *hub // GET /v1/events (events.go)
	keepAlive time.Duration
}

// New returns a server for svc and starts its lapse timer. svc must not be
// used by anything else in this process while the server runs. On a database
// with peers (PostgreSQL), other servers may use it too: this one then takes
// its time from the database's clock unless opts.Clock is set, and listens
// for the other servers' events.
func New(svc *service.Service, opts Options) *Server {
	s := &Server{svc: svc, clock: opts.Clock, log: opts.Logger, kick: make(chan struct{}, 1),
		auth: opts.Authorizer, metrics: opts.Metrics, obs: opts.Observer, waiters: map[string][]*subscription{}}
	if s.clock == nil {
		s.clock = realClock{}
	}
	s.dbClock = svc.HasPeers() && (opts.Clock == nil || opts.TimeFromDatabase)
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.lastTS.Store(math.MinInt64)
	if ts, ok := svc.Clock(); ok {
		s.lastTS.Store(ts) // a clock stepped back across a restart does not run time backwards
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.draining = make(chan struct{})
	s.calls = make(chan *call, maxGroup)
	s.committerDone = make(chan struct{})
	s.startEvents(opts)
	svc.OnCommit(s.dispatch)
	s.startAudit() // before the first transaction
	s.routes()
	s.loopWG.Add(2)
	go s.lapseLoop()
	go s.commitLoop()
	if svc.HasPeers() {
		s.loopWG.Add(1)
		go s.listenLoop()
	}
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.observed(s.mux) }

// Counts returns how many locks have live leases and how many clients wait,
// now: for a metrics gauge. It costs a pass over the live leases and queue,
// read apart from the committer (read.go), which it never holds up.
func (s *Server) Counts(ctx context.Context) (held, waiting int64, err error) {
	held, waiting, err = s.svc.ReadCounts(ctx, s.readTS())
	if !errors.Is(err, service.ErrNeedsTx) {
		return held, waiting, err
	}
	err = s.submit(ctx, "counts", func(ctx context.Context, ts int64) error {
		var err error
		held, waiting, err = s.svc.Counts(ctx, ts)
		return err
	})
	return held, waiting, err
}

// Drain makes blocked acquires answer at once with their current state, for
// a graceful shutdown: call it, let the HTTP server finish its requests, then
// Close.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Close drains, stops the lapse timer and the committer, and answers
// operations still waiting for it with ErrClosed. It does not close the
// service.
func (s *Server) Close() error {
	s.Drain()
	s.cancel()
	s.loopWG.Wait()
	for {
		select {
		case c := <-s.calls:
			c.err = ErrClosed
			close(c.done)
		default:
			return nil
		}
	}
}

// tick returns the ts for an operation starting now: the clock in whole
// seconds, never below the last ts used, nor, on a database with peers, below
// the time other servers moved the service to. Callers run in a group.
func (s *Server) tick() int64 {
	var ts int64
	if t, ok := s.svc.DatabaseTime(); s.dbClock && ok {
		ts = int64(math.Floor(t))
		s.offset.Store(int64((t - float64(s.clock.Now().UnixNano())/1e9) * 1e9))
	} else {
		ts = s.clock.Now().Unix()
	}
	if c, ok := s.svc.Clock(); ok && s.svc.HasPeers() && c > ts {
		ts = c
	}
	if last := s.lastTS.Load(); ts < last && !failpoint.Enabled(failpoint.TimeBackwards) {
		ts = last
	}
	s.lastTS.Store(ts)
	return ts
}

// now is this server's best reading of the time ticks are taken from.
func (s *Server) now() time.Time {
	return s.clock.Now().Add(time.Duration(s.offset.Load()))
}

// call is one operation waiting for the committer: exec runs it at the ts
// the committer gives it.
type call struct {
	name string // for the log
	exec func(ctx context.Context, ts int64) error
	err  error
	done chan struct{}
}

// maxGroup bounds how many operations share one commit.
const maxGroup = 512

// ErrClosed is returned for operations submitted after Close.
var ErrClosed = errors.New("server closed")

// run runs exec at the server's time in the next group commit and returns
// its result once the group is durable.
func run[R any](s *Server, ctx context.Context, name string, exec func(ctx context.Context, ts int64) (R, error)) (R, error) {
	var res R
	err := s.submit(ctx, name, func(ctx context.Context, ts int64) error {
		var err error
		res, err = exec(ctx, ts)
		return err
	})
	return res, err
}

// submit hands exec to the committer, which runs it at the server's time in
// the next group, and returns its result once the group is durable.
func (s *Server) submit(ctx context.Context, name string, exec func(ctx context.Context, ts int64) error) error {
	c := &call{name: name, exec: exec, done: make(chan struct{})}
	select {
	case s.calls <- c:
	case <-s.ctx.Done():
		return ErrClosed
	}
	// Once submitted, an operation runs whether or not its caller still
	// listens: the caller learns its fate only here. A call the committer
	// never took, because it stopped, never ran.
	select {
	case <-c.done:
	case <-s.committerDone:
		select {
		case <-c.done:
		default:
			return ErrClosed
		}
	}
	s.poke()
	return c.err
}

// commitLoop is group commit: it takes whatever operations are waiting, runs
// them in order in one transaction (each in its own savepoint), commits once,
// and only then answers them. While one group syncs to disk the next one
// forms, so a busy server syncs once for many operations and an idle one
// answers at once.
func (s *Server) commitLoop() {
	defer s.loopWG.Done()
	// After this, submit stops waiting for calls nobody will take (the
	// lapse loop's among them, which Close waits for).
	defer close(s.committerDone)
	for {
		var first *call
		select {
		case first = <-s.calls:
		case <-s.ctx.Done():
			return // Close answers what is left
		}
		group := []*call{first}
	fill:
		for len(group) < maxGroup {
			select {
			case c := <-s.calls:
				group = append(group, c)
			default:
				break fill
			}
		}
		// Operations run to completion even while the server closes: a
		// statement cut off half-way would only turn into an error.
		ctx := context.WithoutCancel(s.ctx)
		start := time.Now()
		answered := false
		err := s.svc.Group(ctx, func() {
			for _, c := range group {
				s.run(ctx, c)
			}
			if failpoint.Enabled(failpoint.AnswerBeforeCommit) {
				// The fault: answers sent for a transaction not yet
				// durable; the sleep widens the window a kill -9 needs.
				for _, c := range group {
					close(c.done)
				}
				answered = true
				time.Sleep(20 * time.Millisecond)
			}
		})
		if s.obs != nil {
			s.obs.Commit(len(group), time.Since(start))
		}
		if answered {
			continue
		}
		if err != nil {
			// The group's events were dropped with it, though a commit cut
			// off may have happened: blocked acquires read their state.
			s.recheck()
		}
		for _, c := range group {
			if err != nil {
				c.err = err
			}
			close(c.done)
		}
	}
}

// run executes one call inside the committer's group. A panic is a bug, but
// it must not take the server down: its savepoint is already rolled back, the
// call answers an internal error, and the rest of the group goes on.
func (s *Server) run(ctx context.Context, c *call) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("operation panicked", "op", c.name, "panic", p, "stack", string(debug.Stack()))
			c.err = fmt.Errorf("operation %s panicked: %v", c.name, p)
		}
	}()
	c.err = c.exec(ctx, s.tick())
}

// poke tells the lapse loop that the next expiry may have changed.
func (s *Server) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// lapseLoop retires leases at their expiry: a timer for the next expiry, not
// a polling loop. Hand-overs still start at the instant each lease ended (the
// service sees to that, L3); the loop only makes them happen on time, so that
// blocked acquires are answered and listings are current.
func (s *Server) lapseLoop() {
	defer s.loopWG.Done()
	var fire <-chan time.Time
	armed, armedFor := false, int64(0) // fire is set for expiry armedFor
	firedFor := int64(math.MinInt64)   // the expiry the last sweep was for
	var failing time.Duration          // while sweeps fail: the wait before the next
	for {
		// Every request pokes the loop; the timer is set again only when
		// the next expiry moved.
		if next := s.svc.NextExpiry(); !armed || next != armedFor {
			fire, armed, armedFor = nil, true, next
			if next != math.MaxInt64 {
				// A lease ending at E is usable while ts < E: it lapses
				// when the clock reaches E.000. Go timers never fire early,
				// and an early bound (NextExpiry may be one) only costs a
				// sweep that finds nothing and leaves the exact next
				// expiry.
				d := max(time.Unix(next, 0).Sub(s.now()), 0)
				if next == firedFor {
					// The sweep found the clock short of next: this
					// machine's reading of the database's clock is a little
					// ahead. Try again soon, not at once.
					d = max(d, 10*time.Millisecond)
				}
				d = max(d, failing)
				fire = s.clock.After(d)
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-fire:
			armed, firedFor = false, armedFor
			err := s.submit(s.ctx, "lapse", func(ctx context.Context, ts int64) error {
				return s.svc.Advance(ctx, ts)
			})
			if err != nil && s.ctx.Err() == nil {
				level := slog.LevelError
				if errors.Is(err, lk.ErrUnavailable) {
					level = slog.LevelWarn // the database is away: not a fault of ours
				}
				s.log.Log(s.ctx, level, "retiring lapsed leases", "err", err)
				// The database is away: do not hammer it while it recovers.
				failing = min(max(2*failing, 100*time.Millisecond), 2*time.Second)
			} else {
				failing = 0
			}
		}
	}
}

// listenLoop hears what the other servers on the database (its peers) did, to wake
// this server's blocked acquires and move its lapse timer.
func (s *Server) listenLoop() {
	defer s.loopWG.Done()
	s.svc.Listen(s.ctx, func(events []service.Event, resync bool) {
		if resync {
			s.recheck()
		} else {
			s.wake(events)
		}
		s.poke()
	})
}

// recheck tells every blocked acquire to read its state.
func (s *Server) recheck() {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for _, list := range s.waiters {
		for _, sub := range list {
			sub.miss()
		}
	}
}

// dispatch wakes the blocked acquires of the clients in events. It runs with
// the service locked, so it only hands the events over.
func (s *Server) dispatch(events []service.Event) {
	if s.obs != nil {
		s.obs.Events(events)
	}
	s.wake(events)
	s.commitEvents(events)
}

// wake hands events to the blocked acquires of their clients, each only
// the events of the lock it waits for: a client that holds many locks has
// renewals and lapses of the others, which would fill its channel.
func (s *Server) wake(events []service.Event) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for _, e := range events {
		if e.Kind == service.EventGranted && failpoint.Enabled(failpoint.DropWakeup) {
			continue // the fault: the grant's waiter is not told
		}
		for _, sub := range s.waiters[e.Client] {
			if e.Lock != sub.lock {
				continue
			}
			select {
			case sub.events <- e:
			default:
				sub.miss() // dropped: the wait reads the state instead
			}
		}
	}
}

// subscription is a blocked acquire's news: the events of its client on its
// lock, and missed, which says that some were dropped or may have been
// lost (another server's, a failed group) and the state must be read.
type subscription struct {
	lock   string
	events chan service.Event
	missed chan struct{}
}

func (sub *subscription) miss() {
	select {
	case sub.missed <- struct{}{}:
	default: // already pending
	}
}

// subscribe registers a blocked acquire of client for lock; the returned
// function unregisters it.
func (s *Server) subscribe(client, lock string) (*subscription, func()) {
	// Room for a wait's few events and some of an earlier wait's.
	sub := &subscription{lock: lock, events: make(chan service.Event, 16), missed: make(chan struct{}, 1)}
	s.waitMu.Lock()
	s.waiters[client] = append(s.waiters[client], sub)
	s.waitMu.Unlock()
	return sub, func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		list := s.waiters[client]
		for i, c := range list {
			if c == sub {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(s.waiters, client)
		} else {
			s.waiters[client] = list
		}
	}
}
