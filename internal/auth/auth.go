// Package auth authenticates and authorizes the requests of `leasekeeper
// serve --auth-file` (docs/security.md).
//
// An auth file lists principals, each with the SHA-256 of its bearer token
// (so the file holds no secret), a role, and for role client the glob
// patterns of the client ids it may act as:
//
//	{"principals": [
//	  {"name": "etl", "token_sha256": "<64 hex digits>", "clients": ["etl-*"], "role": "client"},
//	  {"name": "ops", "token_sha256": "<64 hex digits>", "role": "admin"}
//	]}
//
// Requests carry the token as "Authorization: Bearer TOKEN". An Authorizer
// answers 401 unauthenticated to a request without a token, with a
// malformed Authorization header, or with a token no principal has; and 403
// forbidden when the principal's role may not do the operation, or
// the request acts as (or, for a client's status, asks about) a client id
// that none of its patterns matches. GET /v1/health, GET /v1/ready and GET
// /v1/openapi.json are open to everyone, token or not: they tell only that
// the server is up (and can reach its database), its clock and version, and
// what the API is. So are the console's files (Access.Op "console"), which
// hold no data: the page asks for a token before it reads any.
//
// What each role may do:
//
//	op                        client           reader   admin
//	acquire, renew, release   own client ids   -        any client id
//	revoke                    -                -        any client id
//	unfence                   -                -        yes
//	write, read               yes              read     yes
//	delete                    own client ids   -        any client id
//	store clear               -                -        yes
//	status                    own client ids   any      any
//	stale (a fence's refusal) own client ids   -        any client id
//	history of a client       own client ids   any      any
//	history of a lock         own ids' rows    yes      yes
//	events of a client        own client ids   any      any
//	events (all)              own ids' events  yes      yes
//	inspect, locks, metrics   -                yes      yes
//	store, graph              -                yes      yes
//	health, ready, console    everyone, without a token
//
// A principal may also carry limits, each optional, each for one server (a
// principal talking to two servers may send twice as much):
//
//	{"name": "etl", ..., "rate": 50, "max_waiting": 10, "max_streams": 8, "max_store_bytes": 1048576, "max_queued": 100}
//
// "rate" is requests a second, with bursts of as many; "max_waiting" is how
// many acquires with a wait may block at once; "max_streams" how many event
// streams may be open at once (DefaultMaxStreams when left out);
// "max_queued" how many of its clients may stand in queues, blocked or not;
// "max_store_bytes" is how many bytes of keys and values the principal's
// writes may hold in the fenced store, all locks together (unlike the
// others, for the whole database: a write beyond is 409 quota_exceeded).
// A request over a limit is answered 429 rate_limited with Retry-After.
// renew and release of what the client holds are never limited: a refused
// renew would cost an honest holder its lease. Those of nothing count
// toward the rate (Charge), and over it are refused
// (server.Denial.UnlessHolds).
//
// Patterns follow path.Match: '*' matches any run of characters other than
// '/', '?' one such character, '[...]' a class, '\\' escapes. So "etl-*"
// matches "etl-a" but not "etl-a/b"; write "etl-*/*" for that.
//
// write and read name no client id in the API, so Authorize cannot limit
// them to a principal's own client ids. Under serve --strict-fencing (the
// default) the service does, for write: a client principal's token must have
// been granted to one of its client ids (ClientScope). read stays open to
// every role (docs/security.md says what that means).
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// An Authorizer's denials carry lk.CodeUnauthenticated (401: no bearer
// token, a malformed Authorization header, or a token that no principal
// has), lk.CodeForbidden (403: the principal's role may not do the
// operation, or the client id is outside its patterns) or
// lk.CodeRateLimited (429: over one of the principal's limits).

// Authorizer is a server.Authorizer over the principals of an auth file. It
// is safe for concurrent use.
type Authorizer struct {
	principals []Principal
	log        *slog.Logger
	// limits are the rate and blocked-acquire limits of the principals
	// that have some, by name (limits.go).
	limits map[string]*limiter
	// streams counts each principal's open event streams, by name.
	streams map[string]*atomic.Int64
	// refusals bounds the log lines of refused requests: a client without
	// a token can cause them as fast as it connects.
	refusals *server.LogLimiter
}

var (
	_ server.Authorizer    = (*Authorizer)(nil)
	_ server.Authenticator = (*Authorizer)(nil)
)

// New returns an Authorizer for principals (from Parse or LoadFile). Refusals
// are logged to log, when it is not nil, with the principal's name, never a
// token.
func New(principals []Principal, log *slog.Logger) *Authorizer {
	a := &Authorizer{principals: principals, log: log, limits: newLimits(principals), streams: map[string]*atomic.Int64{}}
	for _, p := range principals {
		a.streams[p.Name] = new(atomic.Int64)
	}
	if log != nil {
		a.refusals = server.NewLogLimiter(server.RefusalLogRate, server.RefusalLogBurst, func(n int) {
			log.Warn(fmt.Sprintf("suppressed %d refusals", n), "suppressed", n)
		})
	}
	return a
}

// Flush logs the count of refusals left out of the log so far, now rather
// than a second after the first of them: at shutdown, so that it is not lost.
func (a *Authorizer) Flush() {
	if a.refusals != nil {
		a.refusals.Flush()
	}
}

// Principals returns how many principals a has.
func (a *Authorizer) Principals() int { return len(a.principals) }

// Allowed reports whether role may do op at all, whatever the client id; see
// the package's table.
func Allowed(role Role, op string) bool {
	switch op {
	case "health", "ready", "openapi", "console":
		return true
	case "acquire", "renew", "release", "write", "stale", "delete":
		return role == RoleClient || role == RoleAdmin
	case "read", "status", "history", "events":
		return role == RoleClient || role == RoleReader || role == RoleAdmin
	case "inspect", "locks", "store", "graph", "metrics":
		return role == RoleReader || role == RoleAdmin
	case "revoke", "unfence", "store_clear":
		return role == RoleAdmin
	}
	return false // an operation this package does not know: only by a newer package
}

// Authorize implements server.Authorizer.
func (a *Authorizer) Authorize(r *http.Request, acc server.Access) *server.Denial {
	if acc.Op == "health" || acc.Op == "ready" || acc.Op == "openapi" || acc.Op == "console" {
		return nil
	}
	p := a.authenticate(r)
	if p == nil {
		a.refuse(r, acc, nil, "no valid bearer token")
		return &server.Denial{Code: lk.CodeUnauthenticated, Message: "send a valid token: Authorization: Bearer TOKEN"}
	}
	if !Allowed(p.Role, acc.Op) {
		a.refuse(r, acc, p, "the role may not do this operation")
		return &server.Denial{Code: lk.CodeForbidden, Message: "principal " + p.Name + " (" + string(p.Role) + ") may not " + acc.Op}
	}
	// A lock's history names no client id: the server shows a client
	// principal only its own client ids' rows of it (server.ClientScoper).
	// Nor does the event stream without ?client=: it shows only theirs.
	lockHistory := (acc.Op == "history" || acc.Op == "events") && acc.Client == ""
	if p.Role == RoleClient && actsAsClient(acc.Op) && !lockHistory && !p.matches(acc.Client) {
		a.refuse(r, acc, p, "the client id matches none of the principal's patterns")
		return &server.Denial{Code: lk.CodeForbidden, Message: "principal " + p.Name + " may not act as client " + strconv.Quote(acc.Client)}
	}
	return a.limit(r, acc, p)
}

// Authenticate implements server.Authenticator: it refuses a request
// without a valid token, on its headers alone.
func (a *Authorizer) Authenticate(r *http.Request, acc server.Access) *server.Denial {
	if a.authenticate(r) == nil {
		a.refuse(r, acc, nil, "no valid bearer token")
		return &server.Denial{Code: lk.CodeUnauthenticated, Message: "send a valid token: Authorization: Bearer TOKEN"}
	}
	return nil
}

// actsAsClient reports whether op's Access.Client is limited to a client
// principal's patterns: the client it acts as, or the one whose status it
// asks.
func actsAsClient(op string) bool {
	switch op {
	case "acquire", "renew", "release", "revoke", "status", "history", "events", "stale", "delete":
		return true
	}
	return false
}

func (p *Principal) matches(client string) bool {
	for _, pat := range p.Clients {
		if ok, _ := path.Match(pat, client); ok {
			return true
		}
	}
	return false
}

// authenticate returns the principal whose token the request carries, or
// nil. The presented token's hash is compared with every principal's, in
// constant time, so that the time taken tells nothing about which hash came
// close.
func (a *Authorizer) authenticate(r *http.Request) *Principal {
	token, ok := bearer(r)
	if !ok {
		return nil
	}
	h := sha256.Sum256([]byte(token))
	var found *Principal
	for i := range a.principals {
		if subtle.ConstantTimeCompare(h[:], a.principals[i].hash[:]) == 1 {
			found = &a.principals[i]
		}
	}
	return found
}

// bearer returns the token of the request's one "Authorization: Bearer
// TOKEN" header (the scheme in any case, RFC 7235).
func bearer(r *http.Request) (string, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	for _, c := range token {
		if c <= ' ' || c == 0x7f {
			return "", false
		}
	}
	return token, true
}

// refuse logs a refusal: who (the principal's name, never its token), what,
// and why.
func (a *Authorizer) refuse(r *http.Request, acc server.Access, p *Principal, why string) {
	if a.log == nil || !a.refusals.Allow() {
		return
	}
	attrs := []any{"op", acc.Op, "remote", r.RemoteAddr, "why", why}
	if acc.Client != "" {
		attrs = append(attrs, "client", acc.Client)
	}
	if p == nil {
		a.log.Warn("request refused: unauthenticated", attrs...)
		return
	}
	attrs = append(attrs, "principal", p.Name, "role", string(p.Role))
	a.log.Warn("request refused: forbidden", attrs...)
}

// StoreBound implements server.StoreBounder: the max_store_bytes of the
// principal of r, 0 when it has none.
func (a *Authorizer) StoreBound(r *http.Request) int64 {
	if p := a.authenticate(r); p != nil {
		return p.MaxStoreBytes
	}
	return 0
}
