package server

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
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
	var wr engine.Writer
	if cs, ok := s.auth.(ClientScoper); ok {
		wr.MayActAs = cs.ClientScope(r)
	}
	if id, ok := s.auth.(Identifier); ok {
		wr.Principal = id.Principal(r)
	}
	if sb, ok := s.auth.(StoreBounder); ok {
		wr.MaxBytes = sb.StoreBound(r)
	}
	operation(s, "write", body, decodeWrite, func(ctx context.Context, q lk.WriteRequest) (lk.WriteResult, error) {
		return s.eng.Write(ctx, q, wr)
	}).ServeHTTP(w, r)
}

// StoreBounder is an Authorizer whose principals may each have a bound on
// the bytes their writes hold in the fenced store, all locks together.
type StoreBounder interface {
	// StoreBound returns the bound of the principal of r, already
	// allowed; 0 when it has none.
	StoreBound(r *http.Request) int64
}

func decodeDelete(f *fields) lk.DeleteRequest {
	return lk.DeleteRequest{Client: f.name("client"), Lock: f.name("lock"), Key: f.name("key"), Token: f.integer("token", true, 0)}
}

func decodeStoreClear(f *fields) lk.StoreClearRequest {
	return lk.StoreClearRequest{Lock: f.name("lock")}
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
