// Package server serves the lock service over HTTP (docs/api.md). It reads
// its clock once per request, in whole Unix seconds that never run
// backwards, retires leases at their expiry with a timer (no request needs to
// arrive), and answers blocked acquires when their client is granted or
// aborted.
package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/service"
)

// Options configure a Server.
type Options struct {
	// Clock is the time source; nil means the real clock.
	Clock Clock
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
}

// Server is the HTTP front of one service.
type Server struct {
	svc    *service.Service
	clock  Clock
	log    *slog.Logger
	mux    *http.ServeMux
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	loopWG sync.WaitGroup
	kick   chan struct{} // the next expiry may have moved

	opMu   sync.Mutex // one operation at a time, in ts order
	lastTS int64      // the last ts used; never decreases

	waitMu  sync.Mutex
	waiters map[string][]chan service.Event // blocked acquires by client
}

// New returns a server for svc and starts its lapse timer. svc must not be
// used by anything else while the server runs.
func New(svc *service.Service, opts Options) *Server {
	s := &Server{svc: svc, clock: opts.Clock, log: opts.Logger, kick: make(chan struct{}, 1),
		waiters: map[string][]chan service.Event{}}
	if s.clock == nil {
		s.clock = realClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.lastTS = math.MinInt64
	if ts, ok := svc.Clock(); ok {
		s.lastTS = ts // a clock stepped back across a restart does not run time backwards
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc.Notify(s.dispatch)
	s.routes()
	s.loopWG.Add(1)
	go s.lapseLoop()
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the lapse timer and answers blocked acquires at once. It does
// not close the service.
func (s *Server) Close() error {
	s.cancel()
	s.loopWG.Wait()
	return nil
}

// tick returns the ts for an operation starting now: the clock in whole
// seconds, never below the last ts used. Callers hold opMu.
func (s *Server) tick() int64 {
	ts := s.clock.Now().Unix()
	if ts < s.lastTS {
		ts = s.lastTS
	}
	s.lastTS = ts
	return ts
}

// do runs one contract operation (without its ts) at the server's time and
// returns its result, through the same validation as `leasekeeper run`.
func (s *Server) do(ctx context.Context, name string, args ...any) (any, error) {
	s.opMu.Lock()
	op := append([]any{name, s.tick()}, args...)
	res, err := harness.Run(ctx, s.svc, []any{op})
	s.opMu.Unlock()
	s.poke()
	if err != nil {
		return nil, err
	}
	return res[0], nil
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
	for {
		var fire <-chan time.Time
		if next := s.svc.NextExpiry(); next != math.MaxInt64 {
			// A lease ending at E is usable while ts < E: it lapses when
			// the clock reaches E.000. Go timers never fire early, and an
			// early bound (NextExpiry may be one) only costs an Advance
			// that finds nothing and leaves the exact next expiry.
			fire = s.clock.After(max(time.Unix(next, 0).Sub(s.clock.Now()), 0))
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-fire:
			s.opMu.Lock()
			ts := s.tick()
			if err := s.svc.Advance(s.ctx, ts); err != nil && s.ctx.Err() == nil {
				s.log.Error("retiring lapsed leases", "err", err)
			}
			s.opMu.Unlock()
		}
	}
}

// dispatch wakes the blocked acquires of the clients in events. It runs with
// the service locked, so it only hands the events over.
func (s *Server) dispatch(events []service.Event) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for _, e := range events {
		for _, ch := range s.waiters[e.Client] {
			select {
			case ch <- e:
			default:
			}
		}
	}
}

// subscribe registers a blocked acquire of client; the returned function
// unregisters it.
func (s *Server) subscribe(client string) (<-chan service.Event, func()) {
	ch := make(chan service.Event, 4)
	s.waitMu.Lock()
	s.waiters[client] = append(s.waiters[client], ch)
	s.waitMu.Unlock()
	return ch, func() {
		s.waitMu.Lock()
		defer s.waitMu.Unlock()
		list := s.waiters[client]
		for i, c := range list {
			if c == ch {
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
