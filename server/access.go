package server

import (
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

// Access is what a request asks to do, for an Authorizer to judge.
type Access struct {
	// Op is the operation: acquire, renew, release, revoke, write, read,
	// inspect, status, locks, health, openapi or metrics.
	Op string
	// Client is the client id the request acts as (acquire, renew, release,
	// revoke) or asks about (status); "" for the others.
	Client string
}

// Denial refuses a request: lk.CodeUnauthenticated (401) or
// lk.CodeForbidden (403), and a message that says why without naming a
// secret.
type Denial struct {
	Code    lk.ErrorCode
	Message string
}

// Authorizer decides who may do what. It runs before the operation, so a
// refused request changes nothing.
type Authorizer interface {
	Authorize(r *http.Request, a Access) *Denial
}

// allowed runs the authorizer, answering the request itself when it refuses.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, a Access) bool {
	if s.auth == nil {
		return true
	}
	if d := s.auth.Authorize(r, a); d != nil {
		if s.obs != nil {
			s.obs.Denied(r, a, d)
		}
		replyError(w, lk.Errorf(d.Code, d.Message))
		return false
	}
	return true
}
