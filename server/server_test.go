package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// fixture is a real server on loopback over a SQLite file, on a manual clock.
type fixture struct {
	t     *testing.T
	clock *server.ManualClock
	url   string
	path  string
	stop  func() // shuts the server down and closes the database; idempotent
	svc   *service.Service
}

func start(t *testing.T, at int64) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.db")
	return startOn(t, path, at)
}

func startOn(t *testing.T, path string, at int64) *fixture {
	t.Helper()
	return startWith(t, path, server.NewManualClock(time.Unix(at, 0)), server.Options{})
}

// startWith starts a server on the database at path with the given clock
// and options.
func startWith(t *testing.T, path string, clock *server.ManualClock, opts server.Options) *fixture {
	t.Helper()
	svc, err := service.Open(context.Background(), path, service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.Clock = clock
	srv := server.New(svc, opts)
	hs := httptest.NewServer(srv.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Drain()
			hs.Close()
			srv.Close()
			svc.Close()
		})
	}
	t.Cleanup(stop)
	return &fixture{t: t, clock: clock, url: hs.URL, path: path, stop: stop, svc: svc}
}

// call sends one request and returns the status and the decoded body.
func (f *fixture) call(method, path string, body any) (int, any) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		f.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, raw, err)
	}
	return resp.StatusCode, v
}

// request turns a contract operation into its HTTP request; ok is false when
// the operation has no HTTP form (repeat, a wrong element count, a query
// parameter that is not a string).
func request(op []any) (method, path string, body map[string]any, ok bool) {
	name, _ := op[0].(string)
	fields := map[string][]string{
		"acquire": {"client", "lock", "ttl", "mode"}, "renew": {"client", "lock", "ttl"},
		"release": {"client", "lock"}, "write": {"lock", "key", "value", "token"},
		"inspect": {"lock"}, "status": {"client"}, "read": {"lock", "key"},
	}[name]
	args := op[2:]
	if fields == nil || len(args) > len(fields) || (len(args) < len(fields) && !(name == "acquire" && len(args) == 3)) {
		return "", "", nil, false
	}
	switch name {
	case "inspect", "status", "read":
		q := url.Values{}
		for i, a := range args {
			s, isString := a.(string)
			if !isString {
				return "", "", nil, false
			}
			q.Set(fields[i], s)
		}
		return "GET", "/v1/" + name + "?" + q.Encode(), nil, true
	}
	body = map[string]any{}
	for i, a := range args {
		body[fields[i]] = a
	}
	return "POST", "/v1/" + name, body, true
}

// TestGoldenOverHTTP replays every golden case that has an HTTP form through
// the API, the manual clock set to each operation's ts, and compares the
// bodies with the hand-derived results.
func TestGoldenOverHTTP(t *testing.T) {
	replayed := 0
	for _, c := range testutil.GoldenCases(t) {
		type step struct {
			ts           int64
			method, path string
			body         map[string]any
		}
		var steps []step
		last, usable := int64(0), true
		for i, raw := range c.Ops {
			op, isArray := raw.([]any)
			if !isArray || len(op) < 2 {
				usable = false
				break
			}
			n, isNumber := op[1].(json.Number)
			ts, err := n.Int64()
			if !isNumber || err != nil || strings.ContainsAny(string(n), ".eE") || (i > 0 && ts < last) ||
				ts < -1<<40 || ts > 1<<40 {
				usable = false // the server's clock cannot run backwards or leave the calendar
				break
			}
			method, path, body, ok := request(op)
			if !ok {
				usable = false
				break
			}
			last = ts
			steps = append(steps, step{ts, method, path, body})
		}
		if !usable {
			continue
		}
		replayed++
		for _, backend := range []string{"sqlite", "postgres"} {
			t.Run(backend+"/"+c.Name, func(t *testing.T) {
				var f *fixture
				if backend == "sqlite" {
					f = start(t, steps[0].ts)
				} else {
					t.Parallel()
					f = startOn(t, pgtest.DSN(t), steps[0].ts)
				}
				for i, s := range steps {
					f.clock.Set(time.Unix(s.ts, 0))
					status, got := f.call(s.method, s.path, s.body)
					if !harness.Equal(got, c.Want[i]) {
						w, _ := json.Marshal(c.Want[i])
						g, _ := json.Marshal(got)
						t.Errorf("op %d %v: got %s (HTTP %d), want %s", i, c.Ops[i], g, status, w)
					}
					if str, _ := got.(string); strings.HasPrefix(str, "error: ") == (status == http.StatusOK) {
						t.Errorf("op %d: HTTP %d for %v", i, status, got)
					}
				}
			})
		}
	}
	if replayed < 30 {
		t.Fatalf("only %d golden cases have an HTTP form; expected the examples and most rule cases", replayed)
	}
	t.Logf("%d golden cases replayed over HTTP", replayed)
}

// acquireAsync starts a blocking acquire and returns where its answer arrives.
func (f *fixture) acquireAsync(body map[string]any) <-chan any {
	out := make(chan any, 1)
	go func() {
		_, v := f.call("POST", "/v1/acquire", body)
		out <- v
	}()
	return out
}

// waitQueued polls until client is queued, so that the test knows the
// blocked acquire reached the server.
func (f *fixture) waitQueued(client string) {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		_, st := f.call("GET", "/v1/status?client="+client, nil)
		if m, _ := st.(map[string]any); m != nil && m["waiting"] != nil {
			return
		}
	}
	f.t.Fatalf("%s never got queued", client)
}

func receive(t *testing.T, ch <-chan any) any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked acquire was not answered")
		return nil
	}
}

func expect(t *testing.T, got any, want string) {
	t.Helper()
	var w any
	dec := json.NewDecoder(strings.NewReader(want))
	dec.UseNumber()
	dec.Decode(&w)
	if !harness.Equal(got, w) {
		g, _ := json.Marshal(got)
		t.Errorf("got %s, want %s", g, want)
	}
}

// TestBlockedAcquireWokenAtHandOver: with no request arriving, the lapse
// timer retires the holder's lease when the clock passes its expiry, and the
// blocked acquire is answered with a lease that started at that expiry (L3),
// not when anybody looked.
func TestBlockedAcquireWokenAtHandOver(t *testing.T) {
	f := start(t, 1000)
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, `["granted", 1, 1010]`)
	ch := f.acquireAsync(map[string]any{"client": "b", "lock": "L", "ttl": 30, "wait": 600})
	f.waitQueued("b")
	f.clock.Set(time.Unix(1025, 0)) // 15 s after a's lease ended
	expect(t, receive(t, ch), `["granted", 2, 1040]`)
	_, v = f.call("GET", "/v1/inspect?lock=L", nil)
	expect(t, v, `{"holders": [["b", "exclusive", 2, 1040]], "queue": []}`)
}

// TestBlockedAcquireDeadlockVictim: a blocked acquire whose client another
// request chooses as deadlock victim is answered as such.
func TestBlockedAcquireDeadlockVictim(t *testing.T) {
	f := start(t, 0)
	f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L1", "ttl": 100})
	f.call("POST", "/v1/acquire", map[string]any{"client": "y", "lock": "L2", "ttl": 100})
	ch := f.acquireAsync(map[string]any{"client": "y", "lock": "L1", "ttl": 100, "wait": 600})
	f.waitQueued("y")
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L2", "ttl": 100})
	expect(t, v, `["granted", 2, 100, ["y"]]`) // y (age 2) is younger: aborted, its L2 goes to x
	expect(t, receive(t, ch), `["deadlock", ["y"]]`)
}

// TestWaitRunsOut: still queued when the wait ends, the answer is the
// current position, and the client stays queued.
func TestWaitRunsOut(t *testing.T) {
	f := start(t, 0)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 1000})
	f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 10})
	ch := f.acquireAsync(map[string]any{"client": "c", "lock": "L", "ttl": 10, "wait": 5})
	f.waitQueued("c")
	f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"}) // c moves up
	f.clock.Set(time.Unix(6, 0))
	expect(t, receive(t, ch), `["queued", 1]`)
	_, v := f.call("GET", "/v1/status?client=c", nil)
	expect(t, v, `{"age": 3, "holds": [], "waiting": "L"}`)
}

// TestWithdrawnWhileWaiting: a release of the waiting client from elsewhere
// answers its blocked acquire with "withdrawn".
func TestWithdrawnWhileWaiting(t *testing.T) {
	f := start(t, 0)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 1000})
	ch := f.acquireAsync(map[string]any{"client": "b", "lock": "L", "ttl": 10, "wait": 600})
	f.waitQueued("b")
	_, v := f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
	expect(t, v, `"withdrawn"`)
	expect(t, receive(t, ch), `"withdrawn"`)
}

// TestBadRequests: malformed, oversized and out-of-limit requests get a 4xx
// with a clear error and change nothing; the server goes on serving.
func TestBadRequests(t *testing.T) {
	f := start(t, 0)
	raw := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	long := strings.Repeat("x", server.MaxNameBytes+1)
	for _, c := range []struct {
		method, path, body string
		status             int
		prefix             string
	}{
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10`, 400, `"error: invalid arguments`},
		{"POST", "/v1/acquire", `[1, 2]`, 400, `"error: invalid arguments`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10} {}`, 400, `"error: invalid arguments`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": "10"}`, 400, `"error: invalid arguments"`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10.0}`, 400, `"error: invalid arguments"`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 0}`, 400, `"error: invalid ttl"`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "mode": "Shared"}`, 400, `"error: invalid arguments"`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": -1}`, 400, `"error: invalid arguments: wait`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 3601}`, 400, `"error: invalid arguments: wait`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 4611686018427387904}`, 400, `"error: invalid arguments: wait`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 1e1}`, 400, `"error: invalid arguments: wait`},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "` + long + `", "ttl": 10}`, 400, `"error: invalid arguments: lock is longer`},
		{"GET", "/v1/inspect?lock=" + long, ``, 400, `"error: invalid arguments: lock is longer`},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "` + strings.Repeat("v", server.MaxValueBytes+1) + `", "token": 1}`, 400, `"error: invalid arguments: value is longer`},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "` + strings.Repeat("v", server.MaxBodyBytes) + `", "token": 1}`, 413, `"error: request body too large"`},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "v", "token": 0}`, 400, `"error: invalid arguments"`},
		{"POST", "/v1/renew", `{"client": "a", "lock": "L", "ttl": 10}`, 409, `"error: not holder"`},
		{"GET", "/v1/acquire", ``, 405, `"error: method not allowed"`},
		{"DELETE", "/v1/locks", ``, 405, `"error: method not allowed"`},
		{"GET", "/v2/anything", ``, 404, `"error: not found"`},
	} {
		status, body := raw(c.method, c.path, c.body)
		if status != c.status || !strings.HasPrefix(body, c.prefix) {
			t.Errorf("%s %s %.60s: HTTP %d %.120s; want %d %s", c.method, c.path, c.body, status, body, c.status, c.prefix)
		}
	}
	_, v := f.call("GET", "/v1/locks", nil)
	expect(t, v, `[]`)
	_, v = f.call("GET", "/v1/status?client=a", nil)
	expect(t, v, `{"age": null, "holds": [], "waiting": null}`)
}

// TestClockNeverRunsBackwards: a clock stepped back, even across a restart
// on the same file, does not move the server's time back.
func TestClockNeverRunsBackwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock.db")
	f := startOn(t, path, 5000)
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, `["granted", 1, 5010]`)
	f.clock.Set(time.Unix(4000, 0))
	_, v = f.call("POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, `["renewed", 1, 5010]`)
	_, v = f.call("GET", "/v1/health", nil)
	expect(t, v, `{"status": "ok", "clock": 5000}`)

	f.stop()
	g := startOn(t, path, 4000) // restarted with the clock still behind
	_, v = g.call("GET", "/v1/health", nil)
	expect(t, v, `{"status": "ok", "clock": 5000}`)
	_, v = g.call("POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 20})
	expect(t, v, `["renewed", 1, 5020]`)
}

// TestConcurrentRequestsGroupCommit: hundreds of clients at once, every
// request answered (no database contention reaches anyone), every grant with
// its own token per lock.
func TestConcurrentRequestsGroupCommit(t *testing.T) {
	f := start(t, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	tokens := map[string]map[string]bool{}
	const clients, rounds = 200, 5
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lock := fmt.Sprintf("L%d", i%8)
			client := fmt.Sprintf("c%d", i)
			for j := 0; j < rounds; j++ {
				_, v := f.call("POST", "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 100, "mode": "shared"})
				res, _ := v.([]any)
				if len(res) < 2 || res[0] != "granted" {
					t.Errorf("shared acquire: %v", v)
					return
				}
				mu.Lock()
				if tokens[lock] == nil {
					tokens[lock] = map[string]bool{}
				}
				tok := string(res[1].(json.Number))
				if tokens[lock][tok] {
					t.Errorf("token %s of %s issued twice", tok, lock)
				}
				tokens[lock][tok] = true
				mu.Unlock()
				if _, v := f.call("POST", "/v1/release", map[string]any{"client": client, "lock": lock}); v != "released" {
					t.Errorf("release: %v", v)
				}
			}
		}(i)
	}
	wg.Wait()
	n := 0
	for _, ts := range tokens {
		n += len(ts)
	}
	if n != clients*rounds {
		t.Errorf("%d grants recorded, want %d", n, clients*rounds)
	}
}

// TestRestartHandsOverLapsedLeases: leases that ran out while the server
// was down are retired at their own expiry after the restart, and their
// locks handed over at those instants (L3), not at the restart's time.
func TestRestartHandsOverLapsedLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "down.db")
	f := startOn(t, path, 100)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 20})
	f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": "L", "ttl": 500})
	f.stop()
	// Down from 100 to 200: a ended at 110, b held [110, 130), c got L at 130.
	g := startOn(t, path, 200)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, v := g.call("GET", "/v1/locks", nil)
		if harness.Equal(v, mustJSON(`[{"lock": "L", "holders": [["c", "exclusive", 3, 630]], "waiting": 0}]`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart /v1/locks = %v; want c holding token 3 from 130 to 630", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustJSON(s string) any {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	return v
}

// TestRevoke: revoke ends the holder's lease now and hands the lock over at
// that instant; a blocked waiter is answered; the revoked holder is not
// holder any more and its token is fenced out by the successor's.
func TestRevoke(t *testing.T) {
	f := start(t, 0)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 100})
	ch := f.acquireAsync(map[string]any{"client": "b", "lock": "L", "ttl": 30, "wait": 600})
	f.waitQueued("b")
	f.clock.Set(time.Unix(7, 0))
	status, v := f.call("POST", "/v1/revoke", map[string]any{"client": "a", "lock": "L"})
	if status != http.StatusOK {
		t.Errorf("revoke: HTTP %d", status)
	}
	expect(t, v, `"revoked"`)
	expect(t, receive(t, ch), `["granted", 2, 37]`)
	status, v = f.call("POST", "/v1/revoke", map[string]any{"client": "a", "lock": "L"})
	if status != http.StatusConflict {
		t.Errorf("second revoke: HTTP %d", status)
	}
	expect(t, v, `"error: not holder"`)
	f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "b", "token": 2})
	_, v = f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "a", "token": 1})
	expect(t, v, `"error: stale token"`)
	status, _ = f.call("POST", "/v1/revoke", map[string]any{"client": "", "lock": "L"})
	if status != http.StatusBadRequest {
		t.Errorf("revoke without a client: HTTP %d", status)
	}
}

// denyAll refuses everything but health, to check that every route asks.
type denyAll struct{ asked []server.Access }

func (d *denyAll) Authorize(r *http.Request, a server.Access) *server.Denial {
	d.asked = append(d.asked, a)
	if a.Op == "health" {
		return nil
	}
	return &server.Denial{Status: http.StatusForbidden, Code: "forbidden"}
}

// TestAuthorizerAsked: every route consults the Authorizer with its
// operation and client, and a refusal changes nothing.
func TestAuthorizerAsked(t *testing.T) {
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "auth.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &denyAll{}
	srv := server.New(svc, server.Options{Authorizer: d, Metrics: http.NotFoundHandler()})
	hs := httptest.NewServer(srv.Handler())
	defer func() { srv.Drain(); hs.Close(); srv.Close(); svc.Close() }()
	f := &fixture{t: t, url: hs.URL}
	for _, c := range []struct {
		method, path string
		body         map[string]any
		want         server.Access
	}{
		{"POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10}, server.Access{Op: "acquire", Client: "a"}},
		{"POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 10}, server.Access{Op: "renew", Client: "a"}},
		{"POST", "/v1/release", map[string]any{"client": "a", "lock": "L"}, server.Access{Op: "release", Client: "a"}},
		{"POST", "/v1/revoke", map[string]any{"client": "a", "lock": "L"}, server.Access{Op: "revoke", Client: "a"}},
		{"POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "v", "token": 1}, server.Access{Op: "write"}},
		{"GET", "/v1/read?lock=L&key=k", nil, server.Access{Op: "read"}},
		{"GET", "/v1/inspect?lock=L", nil, server.Access{Op: "inspect"}},
		{"GET", "/v1/status?client=a", nil, server.Access{Op: "status", Client: "a"}},
		{"GET", "/v1/locks", nil, server.Access{Op: "locks"}},
		{"GET", "/metrics", nil, server.Access{Op: "metrics"}},
	} {
		d.asked = nil
		status, v := f.call(c.method, c.path, c.body)
		if status != http.StatusForbidden || v != "error: forbidden" {
			t.Errorf("%s %s: HTTP %d %v, want 403 error: forbidden", c.method, c.path, status, v)
		}
		if len(d.asked) != 1 || d.asked[0] != c.want {
			t.Errorf("%s %s asked %+v, want %+v", c.method, c.path, d.asked, c.want)
		}
	}
	if status, _ := f.call("GET", "/v1/health", nil); status != http.StatusOK {
		t.Errorf("health: HTTP %d", status)
	}
	if st, _ := svc.Status(context.Background(), 0, "a"); st.Age != 0 {
		t.Errorf("a refused acquire registered the client: %+v", st)
	}
}

// TestCloseWhileSweepQueued: Close returns although the lapse loop's sweep
// is queued behind a group that is still running (here: held up by another
// writer of the file), which the committer never takes once it stops.
func TestCloseWhileSweepQueued(t *testing.T) {
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		path := filepath.Join(t.TempDir(), "server.db")
		f := startOn(t, path, 1000)
		f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 5})
		testutil.Eventually(t, 5*time.Second, "the lapse timer never learnt of the lease", func() bool {
			return f.svc.NextExpiry() == 1005
		})
		time.Sleep(50 * time.Millisecond) // the timer is set for 1005
		other, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := other.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		go http.Get(f.url + "/v1/status?client=x") // a group, waiting for the other writer
		time.Sleep(100 * time.Millisecond)
		f.clock.Set(time.Unix(1010, 0)) // the sweep queues behind that group
		time.Sleep(100 * time.Millisecond)
		closed := make(chan struct{})
		go func() { f.stop(); close(closed) }()
		time.Sleep(100 * time.Millisecond)
		conn.ExecContext(ctx, "ROLLBACK")
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatalf("run %d: Close did not return", i)
		}
		conn.Close()
		other.Close()
	}
}

// TestInvalidUTF8QueryParameter: query parameters are text; bytes that are
// not UTF-8 become U+FFFD, as encoding/json makes them in bodies, on both
// backends alike (PostgreSQL would refuse them, failing the whole group).
func TestInvalidUTF8QueryParameter(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.db")
			if backend == "postgres" {
				path = pgtest.DSN(t)
			}
			f := startOn(t, path, 1000)
			f.call("POST", "/v1/acquire", map[string]any{"client": "caf\uFFFD", "lock": "L", "ttl": 100})
			status, v := f.call("GET", "/v1/status?client=caf%E9", nil)
			if status != http.StatusOK {
				t.Fatalf("HTTP %d: %v", status, v)
			}
			expect(t, v, `{"age": 1, "holds": [["L", "exclusive", 1, 1100]], "waiting": null}`)
		})
	}
}
