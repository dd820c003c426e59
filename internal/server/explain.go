package server

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
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

// handleStatus serves GET /v1/status, its abort scoped.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	scope := s.clientScope(r)
	operation(s, "status", query, decodeStatus, func(ctx context.Context, q lk.StatusRequest) (lk.StatusResult, error) {
		res, err := s.eng.Status(ctx, q)
		res.Aborted = scopeAbort(scope, res.Aborted)
		return res, err
	}).ServeHTTP(w, r)
}
