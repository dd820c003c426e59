package server

import (
	"net/http"
	"sync"

	"github.com/leasekeeper/leasekeeper/service"
)

// Auditor is an Observer that keeps an audit log, written ahead of each
// commit: a transaction's lines reach the operating system before the
// transaction commits, so a kill of the process never leaves a committed
// change without its lines (its blocked acquires, and on PostgreSQL the
// other servers' waiters it wakes, are answered only after the commit).
// Observer.Events then only counts.
type Auditor interface {
	Observer
	// Recover runs once, in New, before the server runs any transaction:
	// the place to settle what a previous run, killed between writing
	// lines and committing, left in doubt (service.AuditCommitted).
	Recover(svc *service.Service)
	// Audit gets a transaction's events just before its COMMIT, and must
	// have written them out of this process before it returns. principal
	// names who last acted as a client id on this server, "" when unknown;
	// it is nil when the Authorizer names no principals (Identifier).
	Audit(events []service.Event, principal func(client string) string)
	// CommitFailed says that the COMMIT of the events last given to Audit
	// failed.
	CommitFailed(err error)
}

// Identifier is an Authorizer that names the principal of a request it has
// allowed, for the audit log.
type Identifier interface {
	Principal(r *http.Request) string
}

// startAudit settles the previous run's doubts and has the service hand
// each transaction's events to the Auditor ahead of its commit.
func (s *Server) startAudit() {
	a, ok := s.obs.(Auditor)
	if !ok {
		return
	}
	a.Recover(s.svc)
	var principal func(string) string
	if _, ok := s.auth.(Identifier); ok {
		principal = s.actors.principal
	}
	s.svc.OnPrepare(func(events []service.Event) { a.Audit(events, principal) }, a.CommitFailed)
}

// actorsKept bounds how many client ids the server remembers the principal
// of: the last actorsKept to 2*actorsKept client ids that acted.
const actorsKept = 1 << 16

// actors remembers which principal last acted as each client id (acquire,
// renew, release) on this server since it started, so that the audit line
// of a deadlock abort can name the victim's principal as well as the
// requester's. Two generations keep the memory bounded: when the current
// one is full it becomes the previous one, and the oldest is dropped.
type actors struct {
	mu        sync.Mutex
	cur, prev map[string]string
}

// note records that the request r, allowed as a, acted as a client id.
func (s *Server) noteActor(r *http.Request, a Access) {
	switch a.Op {
	case "acquire", "renew", "release":
	default:
		return
	}
	id, ok := s.auth.(Identifier)
	if !ok || a.Client == "" {
		return
	}
	p := id.Principal(r)
	s.actors.mu.Lock()
	defer s.actors.mu.Unlock()
	if s.actors.cur[a.Client] == p {
		return
	}
	if s.actors.cur == nil || len(s.actors.cur) >= actorsKept {
		s.actors.prev, s.actors.cur = s.actors.cur, make(map[string]string)
	}
	s.actors.cur[a.Client] = p
}

// principal returns the principal that last acted as client on this
// server, "" when none is remembered.
func (a *actors) principal(client string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.cur[client]; ok {
		return p
	}
	return a.prev[client]
}
