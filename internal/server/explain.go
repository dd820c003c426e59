package server

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// Who may see whom in the answers that say why (docs/api.md): a client
// principal sees the client ids of predecessors, aborts and cycles that it
// may act as, and null for the others; the shape of the explanation stays.
// Readers and administrators see them all.

// clientScope returns the client ids the principal of r may see in
// explanations, nil for all.
func (s *Server) clientScope(r *http.Request) func(string) bool {
	if cs, ok := s.auth.(ClientScoper); ok {
		return cs.ClientScope(r)
	}
	return nil
}

// scopeName is name, or nil when scope hides it. The answers are built
// from the service's events, which other readers share: nothing here is
// changed in place.
func scopeName(scope func(string) bool, name *string) *string {
	if name == nil || scope == nil || scope(*name) {
		return name
	}
	return nil
}

func scopePredecessors(scope func(string) bool, ps []lk.Predecessor) []lk.Predecessor {
	if scope == nil || ps == nil {
		return ps
	}
	out := make([]lk.Predecessor, len(ps))
	for i, p := range ps {
		p.Client = scopeName(scope, p.Client)
		out[i] = p
	}
	return out
}

func scopeAbort(scope func(string) bool, a *lk.Abort) *lk.Abort {
	if scope == nil || a == nil {
		return a
	}
	out := lk.Abort{Victim: scopeName(scope, a.Victim), Age: a.Age, Cycle: make([]lk.CycleMember, len(a.Cycle))}
	for i, m := range a.Cycle {
		m.Client = scopeName(scope, m.Client)
		out.Cycle[i] = m
	}
	return &out
}

func scopeAborts(scope func(string) bool, as []lk.Abort) []lk.Abort {
	if scope == nil || as == nil {
		return as
	}
	out := make([]lk.Abort, len(as))
	for i := range as {
		out[i] = *scopeAbort(scope, &as[i])
	}
	return out
}

// scopeAcquire hides, in an acquire's answer, the client ids the principal
// may not see.
func scopeAcquire(scope func(string) bool, res lk.AcquireResult) lk.AcquireResult {
	res.Predecessors = scopePredecessors(scope, res.Predecessors)
	res.Aborts = scopeAborts(scope, res.Aborts)
	return res
}

// handleStatus serves GET /v1/status, read apart, its abort scoped.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	scope := s.clientScope(r)
	scoped := func(read func(context.Context, int64, lk.StatusRequest) (lk.StatusResult, error)) func(context.Context, int64, lk.StatusRequest) (lk.StatusResult, error) {
		return func(ctx context.Context, ts int64, q lk.StatusRequest) (lk.StatusResult, error) {
			res, err := read(ctx, ts, q)
			res.Aborted = scopeAbort(scope, res.Aborted)
			return res, err
		}
	}
	readOperation(s, "status", decodeStatus, scoped(s.svc.ReadStatus), scoped(s.svc.Status)).ServeHTTP(w, r)
}

// predecessors returns those of the grant e reports. Another server's
// notification may not carry them, or only some (Truncated; nor does a
// grant without any): they are read then, from the grant history, which
// the grant's commit holds. A
// failed read leaves them out rather than fail a granted acquire.
func (s *Server) predecessors(ctx context.Context, e service.Event) []lk.Predecessor {
	if e.Predecessors != nil && !e.Truncated || !s.svc.Explains() {
		return e.Predecessors
	}
	ps, _ := run(s, ctx, "predecessors", func(ctx context.Context, ts int64) ([]lk.Predecessor, error) {
		return s.svc.Predecessors(ctx, ts, e.Lock, e.Token)
	})
	return ps
}

// lastAbort returns client's abort, read for an abort another server
// reported; nil when the read fails.
func (s *Server) lastAbort(ctx context.Context, client string) *lk.Abort {
	a, _ := run(s, ctx, "last-abort", func(ctx context.Context, ts int64) (*lk.Abort, error) {
		return s.svc.LastAbort(ctx, ts, client)
	})
	return a
}
