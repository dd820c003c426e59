package server

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

// ClientScoper is an Authorizer that limits some principals to client ids of
// their own: the server then lets such a principal write to the fenced
// store only with a token granted to one of them (checked by the rules
// under strict fencing, against the token's row of grants).
type ClientScoper interface {
	// ClientScope returns whether the principal of r, already allowed, may
	// act as a client id; nil when it may act as any.
	ClientScope(r *http.Request) func(client string) bool
}

// handleWrite serves POST /v1/write, within the principal's client ids.
func (s *Server) handleWrite(w http.ResponseWriter, r *http.Request) {
	var scope func(string) bool
	if cs, ok := s.auth.(ClientScoper); ok {
		scope = cs.ClientScope(r)
	}
	operation(s, "write", body, decodeWrite, func(ctx context.Context, q lk.WriteRequest) (lk.WriteResult, error) {
		return s.eng.Write(ctx, q, scope)
	}).ServeHTTP(w, r)
}

func decodeUnfence(f *fields) lk.UnfenceRequest { return lk.UnfenceRequest{Lock: f.name("lock")} }

// handleUnfence serves POST /v1/unfence, an administrator's repair of a
// lock fenced beyond its last issued token. The audit line names the
// principal that asked, when the Authorizer names principals.
func (s *Server) handleUnfence(w http.ResponseWriter, r *http.Request) {
	var by string
	if id, ok := s.auth.(Identifier); ok {
		by = id.Principal(r)
	}
	operation(s, "unfence", body, decodeUnfence, func(ctx context.Context, q lk.UnfenceRequest) (lk.UnfenceResult, error) {
		q.By = by
		return s.eng.Unfence(ctx, q)
	}).ServeHTTP(w, r)
}
