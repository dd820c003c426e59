package server_test

import (
	"net/http"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// startWhy starts a server as serve does, its answers saying why
// (service.Config.Explain), on the database at path at time at.
func startWhy(t *testing.T, path string, at int64, opts server.Options) *fixture {
	t.Helper()
	return startService(t, path, engine.Options{Rules: service.Config{Explain: true}, Clock: engine.NewManualClock(time.Unix(at, 0))}, opts)
}

// TestPredecessorsAndWaitsOverHTTP: an acquire granted after a lapse names
// the lapsed lease; a blocked acquire granted at a release names the
// released one; queued answers, inspect's queue and status's waiting carry
// the estimated wait once the lock has history. Every answer is checked
// against docs/openapi.json.
func TestPredecessorsAndWaitsOverHTTP(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startWhy(t, path, 1000, server.Options{})
		_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
		expect(t, v, granted(1, 1000, 1010))
		f.clock.Set(time.Unix(1020, 0))
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 30})
		expect(t, v, `{"outcome": "granted", "token": 2, "granted_at": 1020, "expires_at": 1050,
			"predecessors": [{"client": "a", "token": 1, "mode": "exclusive", "ended": "lapsed", "ended_at": 1010}]}`)

		ch := f.acquireAsync(map[string]any{"client": "c", "lock": "L", "ttl": 30, "wait": 600})
		f.waitQueued("c")
		f.clock.Set(time.Unix(1021, 0))
		_, v = f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
		expect(t, v, `{"outcome": "released"}`)
		expect(t, receive(t, ch), `{"outcome": "granted", "token": 3, "granted_at": 1021, "expires_at": 1051,
			"predecessors": [{"client": "b", "token": 2, "mode": "exclusive", "ended": "released", "ended_at": 1021}]}`)

		// Holds of 10 s (a lapse) and 1 s: c is expected to leave 5.5 s
		// after its grant.
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "d", "lock": "L", "ttl": 30})
		expect(t, v, `{"outcome": "queued", "position": 1, "estimated_wait_s": 5.5}`)
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "e", "lock": "L", "ttl": 30, "mode": "shared"})
		expect(t, v, `{"outcome": "queued", "position": 2, "estimated_wait_s": 11}`)
		_, v = f.call("GET", "/v1/inspect?lock=L", nil)
		expect(t, v, `{"lock": "L", "holders": [{"client": "c", "mode": "exclusive", "token": 3, "expires_at": 1051}], "queue": [{"client": "d", "mode": "exclusive", "position": 1, "estimated_wait_s": 5.5}, {"client": "e", "mode": "shared", "position": 2, "estimated_wait_s": 11}], "holder_count": 1, "queue_length": 2}`)
		_, v = f.call("GET", "/v1/status?client=e", nil)
		expect(t, v, `{"client": "e", "age": 5, "holds": [], "waiting": {"lock": "L", "position": 2, "estimated_wait_s": 11}, "next": null}`)
		// A blocked acquire whose wait runs out answers its estimate then.
		ch = f.acquireAsync(map[string]any{"client": "g", "lock": "L", "ttl": 30, "wait": 5})
		f.waitQueued("g")
		f.clock.Set(time.Unix(1027, 0)) // c is past its expected hold: d is next, at once
		expect(t, receive(t, ch), `{"outcome": "queued", "position": 3, "estimated_wait_s": 11}`)
		// A lock without history: no estimate.
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "M", "ttl": 30})
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "M", "ttl": 30})
		expect(t, v, `{"outcome": "queued", "position": 1}`)
	})
}

// TestAbortsOverHTTP: the answer that aborted a victim explains it, and so
// do the victim's blocked acquire, its status, and a renew of the lease it
// lost.
func TestAbortsOverHTTP(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startWhy(t, path, 0, server.Options{})
		f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L1", "ttl": 100})
		f.call("POST", "/v1/acquire", map[string]any{"client": "y", "lock": "L2", "ttl": 100})
		ch := f.acquireAsync(map[string]any{"client": "y", "lock": "L1", "ttl": 100, "wait": 600})
		f.waitQueued("y")
		f.clock.Set(time.Unix(5, 0))
		_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L2", "ttl": 100})
		const why = `{"victim": "y", "age": 2, "cycle": [{"client": "x", "age": 1, "waits_for": "L2"}, {"client": "y", "age": 2, "waits_for": "L1"}]}`
		expect(t, v, `{"outcome": "granted", "token": 2, "granted_at": 5, "expires_at": 105, "victims": ["y"],
			"aborts": [`+why+`],
			"predecessors": [{"client": "y", "token": 1, "mode": "exclusive", "ended": "aborted", "ended_at": 5}]}`)
		expect(t, receive(t, ch), `{"outcome": "deadlock", "victims": ["y"], "aborts": [`+why+`]}`)
		_, v = f.call("GET", "/v1/status?client=y", nil)
		expect(t, v, `{"client": "y", "age": null, "holds": [], "waiting": null, "next": null, "aborted": `+why+`}`)
		status, v := f.call("POST", "/v1/renew", map[string]any{"client": "y", "lock": "L2", "ttl": 10})
		expectError(t, status, v, lk.CodeNotHolder, "aborted as a deadlock victim")
		// Registered again: a new age, and the abort is no longer shown.
		f.call("POST", "/v1/acquire", map[string]any{"client": "y", "lock": "L3", "ttl": 100})
		_, v = f.call("GET", "/v1/status?client=y", nil)
		if m, _ := v.(map[string]any); m == nil || m["aborted"] != nil {
			t.Errorf("status after registering again: %v", v)
		}
	})
}

// scopedAuth lets every request through and limits the principal named by
// the X-Principal header "etl" to the client ids starting with "etl-".
type scopedAuth struct{}

func (scopedAuth) Authorize(*http.Request, server.Access) *server.Denial { return nil }
func (scopedAuth) ClientScope(r *http.Request) func(string) bool {
	if r.Header.Get("X-Principal") != "etl" {
		return nil
	}
	return func(c string) bool { return len(c) > 4 && c[:4] == "etl-" }
}

// TestExplanationsScoped: a client principal sees null for the client ids
// it may not act as, in predecessors, aborts and their cycles, and in
// status's aborted; the others see every name.
func TestExplanationsScoped(t *testing.T) {
	f := startWhy(t, t.TempDir()+"/x.db", 0, server.Options{Authorizer: scopedAuth{}})
	call := func(principal, method, path string, body any) any {
		t.Helper()
		_, v := f.callAs(principal, method, path, body)
		return v
	}
	call("", "POST", "/v1/acquire", map[string]any{"client": "etl-1", "lock": "X", "ttl": 100})
	call("", "POST", "/v1/acquire", map[string]any{"client": "web-1", "lock": "Y", "ttl": 100})
	call("", "POST", "/v1/acquire", map[string]any{"client": "web-1", "lock": "X", "ttl": 100})
	v := call("etl", "POST", "/v1/acquire", map[string]any{"client": "etl-1", "lock": "Y", "ttl": 100})
	expect(t, v, `{"outcome": "granted", "token": 2, "granted_at": 0, "expires_at": 100, "victims": ["web-1"],
		"aborts": [{"victim": null, "age": 2, "cycle": [{"client": "etl-1", "age": 1, "waits_for": "Y"}, {"client": null, "age": 2, "waits_for": "X"}]}],
		"predecessors": [{"client": null, "token": 1, "mode": "exclusive", "ended": "aborted", "ended_at": 0}]}`)
	const named = `{"victim": "web-1", "age": 2, "cycle": [{"client": "etl-1", "age": 1, "waits_for": "Y"}, {"client": "web-1", "age": 2, "waits_for": "X"}]}`
	const hidden = `{"victim": null, "age": 2, "cycle": [{"client": "etl-1", "age": 1, "waits_for": "Y"}, {"client": null, "age": 2, "waits_for": "X"}]}`
	expect(t, call("", "GET", "/v1/status?client=web-1", nil),
		`{"client": "web-1", "age": null, "holds": [], "waiting": null, "next": null, "aborted": `+named+`}`)
	expect(t, call("etl", "GET", "/v1/status?client=web-1", nil),
		`{"client": "web-1", "age": null, "holds": [], "waiting": null, "next": null, "aborted": `+hidden+`}`)
}

// callAs is call with the X-Principal header of scopedAuth.
func (f *fixture) callAs(principal, method, path string, body any) (int, any) {
	f.t.Helper()
	if principal == "" {
		return f.call(method, path, body)
	}
	saved := f.hc
	defer func() { f.hc = saved }()
	f.hc = &http.Client{Transport: headerTransport{saved.Transport, principal}}
	return f.call(method, path, body)
}

type headerTransport struct {
	next      http.RoundTripper
	principal string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Principal", h.principal)
	return h.next.RoundTrip(r)
}

// TestPredecessorsAcrossServers: a blocked acquire held by one server,
// granted by another's release (PostgreSQL), names the released lease.
func TestPredecessorsAcrossServers(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startWhy(t, dsn, 0, server.Options{})
	b := startWhy(t, dsn, 0, server.Options{})
	a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 100})
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 100, "wait": 600})
	a.waitQueued("y")
	_, v := a.call("POST", "/v1/release", map[string]any{"client": "x", "lock": "L"})
	expect(t, v, `{"outcome": "released"}`)
	expect(t, receive(t, ch), `{"outcome": "granted", "token": 2, "granted_at": 0, "expires_at": 100,
		"predecessors": [{"client": "x", "token": 1, "mode": "exclusive", "ended": "released", "ended_at": 0}]}`)
}
