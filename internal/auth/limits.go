package auth

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// MaxLimit bounds "rate", "max_waiting" and "max_queued": beyond it a limit limits
// nothing, and a typo of a few zeros is better refused than obeyed.
const MaxLimit = 1_000_000

// waitingRetryAfter is the Retry-After of a refused blocked acquire: when a
// slot frees is not known, and a second is short next to a wait.
const waitingRetryAfter = time.Second

// refusalLogEvery is how often at most a principal's rate-limited requests
// are logged: a principal over its rate sends many, and each line would say
// the same.
const refusalLogEvery = 10 * time.Second

var (
	_ server.Admitter       = (*Authorizer)(nil)
	_ server.StreamAdmitter = (*Authorizer)(nil)
)

// DefaultMaxStreams is a principal's max_streams when its entry has none:
// each open stream holds a connection and its socket's buffers, and a
// program reading events needs one or two.
const DefaultMaxStreams = 8

// AdmitStream implements server.StreamAdmitter: it takes one of the
// principal's max_streams slots for an event stream, or refuses it.
func (a *Authorizer) AdmitStream(r *http.Request, acc server.Access) (func(), *server.Denial) {
	p := a.authenticate(r)
	if p == nil {
		return func() {}, nil // Authorize has refused it already
	}
	max := int64(p.MaxStreams)
	if max == 0 { // a Principal built by a program, not Parse
		max = DefaultMaxStreams
	}
	n := a.streams[p.Name]
	if n.Add(1) > max {
		n.Add(-1)
		l := a.limits[p.Name]
		if l == nil {
			l = &limiter{name: p.Name}
		}
		a.limited(r, acc, l, fmt.Sprintf("%d event streams open already (max_streams)", max))
		return nil, &server.Denial{Code: lk.CodeRateLimited, RetryAfter: waitingRetryAfter, Principal: p.Name,
			Message: fmt.Sprintf("principal %s has %d event streams open on this server, its max_streams; close one first", p.Name, max)}
	}
	return func() { n.Add(-1) }, nil
}

// parseLimit reads an optional limit of the auth file: absent is 0 (none),
// otherwise an integer from 1 to MaxLimit. 0 is refused rather than read as
// "no limit" or "nothing at all", which a reader could take either way.
func parseLimit(key, unit string, raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	n, ok := lk.Integer(json.Number(raw))
	if !ok || n < 1 || n > MaxLimit {
		shown := string(raw)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return 0, fmt.Errorf("%q must be an integer from 1 to %d (%s on one server; leave it out for no limit), got %s",
			key, MaxLimit, unit, shown)
	}
	return int(n), nil
}

// parseBytes reads the optional "max_store_bytes": absent is 0 (no bound),
// otherwise an integer from 1 up; 0 is refused as parseLimit refuses it.
func parseBytes(key string, raw json.RawMessage) (int64, error) {
	if len(raw) == 0 {
		return 0, nil
	}
	n, ok := lk.Integer(json.Number(raw))
	if !ok || n < 1 {
		shown := string(raw)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return 0, fmt.Errorf("%q must be an integer from 1 up (bytes of keys and values in the fenced store; leave it out for no bound), got %s", key, shown)
	}
	return n, nil
}

// limiter is the state of one principal's limits on this server.
type limiter struct {
	name       string
	rate       *rate.Limiter // nil: no rate limit
	perSecond  int
	maxWaiting int64 // 0: no limit
	waiting    atomic.Int64

	logMu      sync.Mutex
	loggedAt   time.Time
	suppressed int
}

func newLimits(ps []Principal) map[string]*limiter {
	m := map[string]*limiter{}
	for _, p := range ps {
		if p.Rate == 0 && p.MaxWaiting == 0 {
			continue
		}
		l := &limiter{name: p.Name, perSecond: p.Rate, maxWaiting: int64(p.MaxWaiting)}
		if p.Rate > 0 {
			// A bucket of one second's requests: a principal idle for a
			// second may send them at once.
			l.rate = rate.NewLimiter(rate.Limit(p.Rate), p.Rate)
		}
		m[p.Name] = l
	}
	return m
}

// rateExempt reports whether op is not rate-limited for what the principal
// really holds: renew and release keep and end leases, and refusing them
// would cost honest holders (a lease lost for a 429 on its renew, a lock
// held to its expiry for one on its release). They take nothing from the
// rate; one that finds nothing to act on is charged after (Charge), and
// over the rate they pass only where the client holds (or, for a release,
// waits for) the lock (server.Denial.UnlessHolds).
func rateExempt(op string) bool { return op == "renew" || op == "release" }

// limit takes one request from p's rate, or refuses it.
func (a *Authorizer) limit(r *http.Request, acc server.Access, p *Principal) *server.Denial {
	l := a.limits[p.Name]
	if l == nil || l.rate == nil {
		return nil
	}
	now := time.Now()
	if rateExempt(acc.Op) {
		if l.rate.TokensAt(now) >= 1 {
			return nil
		}
	} else if l.rate.AllowN(now, 1) {
		return nil
	}
	// The next request is allowed once the bucket holds a whole token again.
	retry := time.Duration((1 - l.rate.TokensAt(now)) / float64(p.Rate) * float64(time.Second))
	retry = max(retry, time.Second) // Retry-After is in whole seconds
	if rateExempt(acc.Op) {
		return &server.Denial{Code: lk.CodeRateLimited, RetryAfter: retry, Principal: p.Name, UnlessHolds: true,
			Message: fmt.Sprintf("principal %s is over its rate of %d requests a second on this server, and %s holds nothing to %s on %s; retry after %d s (a renew or release of what the client holds is never limited)",
				p.Name, l.perSecond, acc.Client, acc.Op, acc.Lock, int64(math.Ceil(retry.Seconds())))}
	}
	a.limited(r, acc, l, fmt.Sprintf("over its rate of %d requests a second", l.perSecond))
	return &server.Denial{Code: lk.CodeRateLimited, RetryAfter: retry, Principal: p.Name,
		Message: fmt.Sprintf("principal %s is over its rate of %d requests a second on this server; retry after %d s (renew and release of what its clients hold are never limited)",
			p.Name, l.perSecond, int64(math.Ceil(retry.Seconds())))}
}

var _ server.Charger = (*Authorizer)(nil)

// Charge implements server.Charger: a renew or release that found nothing
// takes one request from the principal's rate, even below zero, so that a
// stream of them puts it over the rate.
func (a *Authorizer) Charge(r *http.Request) {
	p := a.authenticate(r)
	if p == nil {
		return
	}
	if l := a.limits[p.Name]; l != nil && l.rate != nil {
		l.rate.ReserveN(time.Now(), 1)
	}
}

// Admit implements server.Admitter: it takes one of the principal's
// max_waiting slots for an acquire with a wait, or refuses it.
func (a *Authorizer) Admit(r *http.Request, acc server.Access) (func(), *server.Denial) {
	p := a.authenticate(r)
	if p == nil {
		// Authorize let it through: only a header changed in between.
		return nil, &server.Denial{Code: lk.CodeUnauthenticated, Message: "send a valid token: Authorization: Bearer TOKEN"}
	}
	l := a.limits[p.Name]
	if l == nil || l.maxWaiting == 0 {
		return func() {}, nil
	}
	for {
		n := l.waiting.Load()
		if n >= l.maxWaiting {
			a.limited(r, acc, l, fmt.Sprintf("%d blocked acquires already (max_waiting)", n))
			return nil, &server.Denial{Code: lk.CodeRateLimited, RetryAfter: waitingRetryAfter, Principal: p.Name,
				Message: fmt.Sprintf("principal %s has %d acquires blocked on this server, its max_waiting; retry once one is answered, or acquire with wait 0",
					p.Name, n)}
		}
		if l.waiting.CompareAndSwap(n, n+1) {
			break
		}
	}
	var once sync.Once
	return func() { once.Do(func() { l.waiting.Add(-1) }) }, nil
}

var _ server.QueueBounder = (*Authorizer)(nil)

// QueuedLimit implements server.QueueBounder: the principal of r and its
// max_queued (0 for none, or for a request without a valid token).
func (a *Authorizer) QueuedLimit(r *http.Request) (string, int) {
	p := a.authenticate(r)
	if p == nil {
		return "", 0
	}
	return p.Name, p.MaxQueued
}

// Waiting returns how many blocked acquires of principal name hold a slot
// now; 0 for one without max_waiting.
func (a *Authorizer) Waiting(name string) int {
	if l := a.limits[name]; l != nil {
		return int(l.waiting.Load())
	}
	return 0
}

// limited logs a rate-limited request: the first of a principal's, then at
// most one line every refusalLogEvery, saying how many were left out.
func (a *Authorizer) limited(r *http.Request, acc server.Access, l *limiter, why string) {
	if a.log == nil {
		return
	}
	l.logMu.Lock()
	now := time.Now()
	if !l.loggedAt.IsZero() && now.Sub(l.loggedAt) < refusalLogEvery {
		l.suppressed++
		l.logMu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.loggedAt, l.suppressed = now, 0
	l.logMu.Unlock()
	attrs := []any{"op", acc.Op, "remote", r.RemoteAddr, "why", why, "principal", l.name}
	if acc.Client != "" {
		attrs = append(attrs, "client", acc.Client)
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	a.log.Warn("request refused: rate limited", attrs...)
}
