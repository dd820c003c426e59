package server

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// Access is what a request asks to do, for an Authorizer to judge.
type Access struct {
	// Op is the operation: acquire, renew, release, revoke, unfence, write, read,
	// inspect, status, locks, history, events, store, graph, health, ready,
	// openapi, metrics, or console (the console's files, which hold no data).
	Op string
	// Client is the client id the request acts as (acquire, renew, release,
	// revoke) or asks about (status, history, events); "" for the others.
	Client string
	// Lock is the lock a renew or a release acts on; "" for the others.
	Lock string
}

// Denial refuses a request: lk.CodeUnauthenticated (401),
// lk.CodeForbidden (403) or lk.CodeRateLimited (429), and a message that
// says why without naming a secret.
type Denial struct {
	Code    lk.ErrorCode
	Message string
	// RetryAfter, for lk.CodeRateLimited, is when the request may be sent
	// again: the answer's Retry-After, in whole seconds rounded up.
	RetryAfter time.Duration
	// Principal is who was refused, when known: a name of the auth file,
	// never a token.
	Principal string
	// UnlessHolds, on a renew or a release of a principal over its rate,
	// lets the request through after all when its client holds a live lease
	// on its lock (or, for a release, waits for it): an honest holder keeps
	// its lease whatever its rate, while renews and releases of nothing are
	// refused as any request over the rate is.
	UnlessHolds bool
}

// Charger is an Authorizer that counts, against the principal's rate, a
// renew or release that found nothing to renew or release: so that a
// principal sending those fast goes over its rate, and its next ones meet
// the UnlessHolds check.
type Charger interface {
	Charge(r *http.Request)
}

// Authorizer decides who may do what. It runs before the operation, so a
// refused request changes nothing.
type Authorizer interface {
	Authorize(r *http.Request, a Access) *Denial
}

// Authenticator is an Authorizer that can tell from a request's headers
// alone whether it carries a valid token. The server asks it about every
// request with a body, except to the open paths, before the body is read:
// a denial (lk.CodeUnauthenticated) is answered without reading it, and the
// connection closed, so that a caller not known cannot make the server read
// (or wait for) a body.
type Authenticator interface {
	Authenticate(r *http.Request, a Access) *Denial
}

// StreamAdmitter is an Authorizer that also bounds how many event streams a
// principal may have open on this server. The server asks it, after
// Authorize, before a stream starts; release frees the slot when the
// stream ends.
type StreamAdmitter interface {
	AdmitStream(r *http.Request, a Access) (release func(), d *Denial)
}

// Admitter is an Authorizer that also bounds how many acquires of a
// principal may block on this server at once. The server asks it, after
// Authorize, about each acquire with a wait, before the acquire runs (a slot
// refused after the client was queued would leave it queued). release frees
// the slot; the server calls it once the acquire is answered, whichever way:
// granted, queued when its wait ran out, aborted, withdrawn, its caller gone,
// or the server draining.
type Admitter interface {
	Admit(r *http.Request, a Access) (release func(), d *Denial)
}

// allowed runs the authorizer, answering the request itself when it refuses.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, a Access) bool {
	if s.auth == nil {
		return true
	}
	if d := s.auth.Authorize(r, a); d != nil {
		if !d.UnlessHolds || !s.holds(r, a) {
			s.deny(w, r, a, d)
			return false
		}
	}
	s.acted(r, a)
	return true
}

// authenticated refuses a request with a body that carries no valid token,
// before its body is read, where the Authorizer is an Authenticator.
func (s *Server) authenticated(h http.Handler) http.Handler {
	an, ok := s.auth.(Authenticator)
	if !ok {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			switch op := opOf(r.URL.Path); op {
			case "health", "ready", "openapi.json", "console":
			default:
				if d := an.Authenticate(r, Access{Op: op}); d != nil {
					s.deny(w, r, Access{Op: op}, d) // closes the connection: see refuse
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// acted tells the observer which principal acted as a client id (acquire,
// renew, release), for the audit log of deadlock aborts.
func (s *Server) acted(r *http.Request, a Access) {
	switch a.Op {
	case "acquire", "renew", "release":
	default:
		return
	}
	id, ok := s.auth.(Identifier)
	if !ok || a.Client == "" || s.obs == nil {
		return
	}
	s.obs.Acted(id.Principal(r), a.Client)
}

// Identifier is an Authorizer that names the principal of a request it has
// allowed, for the audit log.
type Identifier interface {
	Principal(r *http.Request) string
}

// admitted takes a blocked-acquire slot when the Authorizer is an Admitter,
// answering the request itself when it refuses. release is idempotent, so
// that the handler may free the slot before it answers (a caller that has
// its answer may send the next acquire at once) and again, deferred, on
// every other way out.
func (s *Server) admitted(w http.ResponseWriter, r *http.Request, a Access) (release func(), ok bool) {
	ad, is := s.auth.(Admitter)
	if !is {
		return func() {}, true
	}
	rel, d := ad.Admit(r, a)
	if d != nil {
		s.deny(w, r, a, d)
		return nil, false
	}
	if rel == nil {
		return func() {}, true
	}
	return sync.OnceFunc(rel), true
}

// deny answers a refused request, with Retry-After when the Denial has one.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, a Access, d *Denial) {
	if s.obs != nil {
		s.obs.Denied(r, a, d)
	}
	if d.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(d.RetryAfter.Seconds())), 10))
	}
	if d.Code == lk.CodeUnauthenticated || d.Code == lk.CodeForbidden {
		refuse(w, lk.Errorf(d.Code, d.Message)) // and close: see refuse
		return
	}
	replyError(w, lk.Errorf(d.Code, d.Message))
}

// holds reports whether the client of a renew or a release holds what it
// acts on, read apart from the committer: the one read a principal over
// its rate costs before its renew or release is refused. An error counts
// as not holding: the request is then refused as over the rate.
func (s *Server) holds(r *http.Request, a Access) bool {
	held, err := s.eng.Holds(r.Context(), a.Client, a.Lock, a.Op == "release")
	return err == nil && held
}

// charge counts a renew or a release that found nothing against the
// principal's rate, when the Authorizer keeps rates.
func (s *Server) charge(r *http.Request, name string, err error) {
	if name != "renew" && name != "release" || lk.CodeOf(err) != lk.CodeNotHolder {
		return
	}
	if c, ok := s.auth.(Charger); ok {
		c.Charge(r)
	}
}
