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
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// fixture is a real server on loopback over a SQLite file, on a manual clock.
type fixture struct {
	t     *testing.T
	clock *engine.ManualClock
	url   string
	path  string
	stop  func() // shuts the server down and closes the database; idempotent
	eng   *engine.Engine
	hc    *http.Client // checks every answer against docs/openapi.json
}

// validated is an HTTP client whose every answer is checked against the
// API's OpenAPI document, a mismatch failing t.
func validated(t *testing.T) *http.Client {
	return &http.Client{Transport: apitest.New(t).Transport(t, nil)}
}

func start(t *testing.T, at int64) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.db")
	return startOn(t, path, at)
}

func startOn(t *testing.T, path string, at int64) *fixture {
	t.Helper()
	return startWith(t, path, engine.NewManualClock(time.Unix(at, 0)), engine.Options{})
}

// startWith starts a server on the database at path with the given clock
// and engine options.
func startWith(t *testing.T, path string, clock *engine.ManualClock, eo engine.Options) *fixture {
	t.Helper()
	eo.Clock = clock
	return startService(t, path, eo, server.Options{})
}

// startService starts a server with the engine's options, whose Clock is
// a *engine.ManualClock, and the HTTP front's.
func startService(t *testing.T, path string, eo engine.Options, so server.Options) *fixture {
	t.Helper()
	srv := testutil.StartServer(t, path, eo, so)
	clock, _ := eo.Clock.(*engine.ManualClock)
	return &fixture{t: t, clock: clock, url: srv.URL, path: path, stop: srv.Stop, eng: srv.Engine, hc: validated(t)}
}

// call sends one request and returns the status and the decoded body, its
// numbers as json.Number. The answer has been checked against the OpenAPI
// document.
func (f *fixture) call(method, path string, body any) (int, any) {
	f.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			f.t.Fatal(err)
		}
	}
	return f.raw(method, path, string(b))
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

// tuple turns the answer to the contract operation name into the contract's
// result, as `leasekeeper run` prints it: an error object into "error: "
// and its code's text, a result object, read strictly into the operation's
// result type, into harness.Tuple of it. An error answer must carry a
// message and the status of its code.
func tuple(name string, status int, answer any) (any, error) {
	b, err := json.Marshal(answer)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		var e struct {
			Code    lk.ErrorCode `json:"error"`
			Message string       `json:"message"`
		}
		if err := strictly(b, &e); err != nil || e.Code == "" || e.Message == "" {
			return nil, fmt.Errorf("HTTP %d answered %s, not an error object with a code and a message", status, b)
		}
		if want := server.StatusOf(e.Code); status != want {
			return nil, fmt.Errorf("HTTP %d for %s, want %d", status, b, want)
		}
		return "error: " + e.Code.Text(), nil
	}
	var res any
	switch name {
	case "acquire":
		res, err = decodeAs[lk.AcquireResult](b)
	case "renew":
		res, err = decodeAs[lk.RenewResult](b)
	case "release":
		res, err = decodeAs[lk.ReleaseResult](b)
	case "write":
		res, err = decodeAs[lk.WriteResult](b)
	case "read":
		res, err = decodeAs[lk.ReadResult](b)
	case "inspect":
		res, err = decodeAs[lk.InspectResult](b)
	case "status":
		res, err = decodeAs[lk.StatusResult](b)
	default:
		return nil, fmt.Errorf("no result type for %q", name)
	}
	if err != nil {
		return nil, fmt.Errorf("HTTP 200 answered %s, not a %s result: %v", b, name, err)
	}
	return harness.Tuple(res), nil
}

// decodeAs reads b as an R, refusing fields R does not have.
func decodeAs[R any](b []byte) (R, error) {
	var r R
	err := strictly(b, &r)
	return r, err
}

func strictly(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// TestGoldenOverHTTP replays every golden case that has an HTTP form through
// the API, the manual clock set to each operation's ts, and compares the
// answers, as the contract's results (tuple), with the hand-derived ones.
func TestGoldenOverHTTP(t *testing.T) {
	replayed := 0
	for _, c := range testutil.GoldenCases(t) {
		type step struct {
			ts                 int64
			name, method, path string
			body               map[string]any
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
			steps = append(steps, step{ts, op[0].(string), method, path, body})
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
					status, answer := f.call(s.method, s.path, s.body)
					got, err := tuple(s.name, status, answer)
					if err != nil {
						t.Errorf("op %d %v: %v", i, c.Ops[i], err)
						continue
					}
					if !harness.Equal(got, c.Want[i]) {
						w, _ := json.Marshal(c.Want[i])
						g, _ := json.Marshal(got)
						a, _ := json.Marshal(answer)
						t.Errorf("op %d %v: got %s (HTTP %d %s), want %s", i, c.Ops[i], g, status, a, w)
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
	return receiveWithin(t, ch, 5*time.Second)
}

// receiveWithin is receive, waiting up to wait.
func receiveWithin(t *testing.T, ch <-chan any, wait time.Duration) any {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("the blocked acquire was not answered within %v", wait.Round(time.Millisecond))
		return nil
	}
}

// expect checks an answer against the JSON want: the same fields, no
// others, numbers by value.
func expect(t *testing.T, got any, want string) {
	t.Helper()
	if !harness.Equal(got, mustJSON(want)) {
		g, _ := json.Marshal(got)
		t.Errorf("got %s, want %s", g, want)
	}
}

// expectError checks an error answer: the status of code, the error object
// {"error": code, "message": ...} and nothing else, a message that says each
// of says.
func expectError(t *testing.T, status int, got any, code lk.ErrorCode, says ...string) {
	t.Helper()
	g, _ := json.Marshal(got)
	m, _ := got.(map[string]any)
	msg, _ := m["message"].(string)
	fields := 2
	if applied, ok := m["applied"]; ok && status == http.StatusServiceUnavailable && applied == false {
		fields = 3 // a 503 that says the operation did not happen
	}
	if status != server.StatusOf(code) || len(m) != fields || m["error"] != string(code) || msg == "" {
		t.Errorf("got HTTP %d %s, want %d {\"error\": %q, \"message\": ...}", status, g, server.StatusOf(code), code)
		return
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Errorf("%s: the message does not say %q", g, s)
		}
	}
}

// granted is the answer of an acquire granted token from grantedAt to
// expiresAt.
func granted(token, grantedAt, expiresAt int64) string {
	return fmt.Sprintf(`{"outcome": "granted", "token": %d, "granted_at": %d, "expires_at": %d}`, token, grantedAt, expiresAt)
}

// TestBlockedAcquireWokenAtHandOver: with no request arriving, the lapse
// timer retires the holder's lease when the clock passes its expiry, and the
// blocked acquire is answered with a lease that started at that expiry (L3),
// not when anybody looked.
func TestBlockedAcquireWokenAtHandOver(t *testing.T) {
	f := start(t, 1000)
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, granted(1, 1000, 1010))
	ch := f.acquireAsync(map[string]any{"client": "b", "lock": "L", "ttl": 30, "wait": 600})
	f.waitQueued("b")
	f.clock.Set(time.Unix(1025, 0)) // 15 s after a's lease ended
	expect(t, receive(t, ch), granted(2, 1010, 1040))
	_, v = f.call("GET", "/v1/inspect?lock=L", nil)
	expect(t, v, `{"lock": "L", "holders": [{"client": "b", "mode": "exclusive", "token": 2, "expires_at": 1040}], "queue": [], "holder_count": 1, "queue_length": 0}`)
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
	// y (age 2) is younger: aborted, its L2 goes to x
	const why = `[{"victim": "y", "age": 2, "cycle": [{"client": "x", "age": 1, "waits_for": "L2"}, {"client": "y", "age": 2, "waits_for": "L1"}]}]`
	expect(t, v, `{"outcome": "granted", "token": 2, "granted_at": 0, "expires_at": 100, "victims": ["y"], "aborts": `+why+`}`)
	expect(t, receive(t, ch), `{"outcome": "deadlock", "victims": ["y"], "aborts": `+why+`}`)
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
	expect(t, receive(t, ch), `{"outcome": "queued", "position": 1}`)
	_, v := f.call("GET", "/v1/status?client=c", nil)
	expect(t, v, `{"client": "c", "age": 3, "holds": [], "waiting": {"lock": "L", "position": 1}, "next": null}`)
}

// TestWithdrawnWhileWaiting: a release of the waiting client from elsewhere
// answers its blocked acquire with "withdrawn".
func TestWithdrawnWhileWaiting(t *testing.T) {
	f := start(t, 0)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 1000})
	ch := f.acquireAsync(map[string]any{"client": "b", "lock": "L", "ttl": 10, "wait": 600})
	f.waitQueued("b")
	_, v := f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
	expect(t, v, `{"outcome": "withdrawn"}`)
	expect(t, receive(t, ch), `{"outcome": "withdrawn"}`)
}

// raw sends body as it is and returns the status and the decoded answer,
// checked against the OpenAPI document.
func (f *fixture) raw(method, path, body string) (int, any) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		f.t.Fatalf("%s %s: body %q is not JSON: %v", method, path, b, err)
	}
	return resp.StatusCode, v
}

// TestBadRequests: malformed, oversized and out-of-limit requests get a 4xx
// with a clear error and change nothing; the server goes on serving.
func TestBadRequests(t *testing.T) {
	f := start(t, 0)
	long := strings.Repeat("x", server.MaxNameBytes+1)
	for _, c := range []struct {
		method, path, body string
		code               lk.ErrorCode
		says               string
	}{
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10`, lk.CodeInvalidArguments, "the body must be a JSON object"},
		{"POST", "/v1/acquire", `[1, 2]`, lk.CodeInvalidArguments, "the body must be a JSON object"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10} {}`, lk.CodeInvalidArguments, "unexpected data after the JSON object"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": "10"}`, lk.CodeInvalidArguments, "ttl must be an integer"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10.0}`, lk.CodeInvalidArguments, "ttl must be an integer"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 0}`, lk.CodeInvalidTTL, "ttl must be from 1 to 86400 seconds"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "mode": "Shared"}`, lk.CodeInvalidArguments, "mode"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": -1}`, lk.CodeInvalidArguments, "wait"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 3601}`, lk.CodeInvalidArguments, "wait"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 4611686018427387904}`, lk.CodeInvalidArguments, "wait"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "wait": 1e1}`, lk.CodeInvalidArguments, "wait"},
		{"POST", "/v1/acquire", `{"client": "a", "lock": "` + long + `", "ttl": 10}`, lk.CodeInvalidArguments, "lock is longer than 256 bytes"},
		{"GET", "/v1/inspect?lock=" + long, ``, lk.CodeInvalidArguments, "lock is longer than 256 bytes"},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "` + strings.Repeat("v", server.MaxValueBytes+1) + `", "token": 1}`, lk.CodeInvalidArguments, "value is longer than 65536 bytes"},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "` + strings.Repeat("v", server.MaxBodyBytes) + `", "token": 1}`, lk.CodeBodyTooLarge, "131072"},
		{"POST", "/v1/write", `{"lock": "L", "key": "k", "value": "v", "token": 0}`, lk.CodeInvalidArguments, "token"},
		{"POST", "/v1/renew", `{"client": "a", "lock": "L", "ttl": 10}`, lk.CodeNotHolder, ""},
		{"GET", "/v1/acquire", ``, lk.CodeMethodNotAllowed, "POST"},
		{"DELETE", "/v1/locks", ``, lk.CodeMethodNotAllowed, "GET"},
		{"GET", "/v2/anything", ``, lk.CodeNotFound, "/v2/anything"},
	} {
		t.Run(fmt.Sprintf("%s %.40s %.40s", c.method, c.path, c.body), func(t *testing.T) {
			status, v := f.raw(c.method, c.path, c.body)
			expectError(t, status, v, c.code, c.says)
		})
	}
	_, v := f.call("GET", "/v1/locks", nil)
	expect(t, v, `{"locks": [], "next": null}`)
	_, v = f.call("GET", "/v1/status?client=a", nil)
	expect(t, v, `{"client": "a", "age": null, "holds": [], "waiting": null, "next": null}`)
}

// TestErrorMessages: each refused request answers the code of what is
// wrong with a message that names the field (or the path), and changes
// nothing.
func TestErrorMessages(t *testing.T) {
	f := start(t, 1000)
	for _, c := range []struct {
		name, method, path, body string
		code                     lk.ErrorCode
		says                     []string
	}{
		{"null body", "POST", "/v1/acquire", `null`, lk.CodeInvalidArguments,
			[]string{"the body must be a JSON object, got null"}},
		{"empty lock", "POST", "/v1/acquire", `{"client": "a", "lock": "", "ttl": 10}`, lk.CodeInvalidArguments,
			[]string{"lock must be a non-empty string"}},
		{"empty client", "POST", "/v1/acquire", `{"client": "", "lock": "L", "ttl": 10}`, lk.CodeInvalidArguments,
			[]string{"client must be a non-empty string"}},
		{"empty client of renew", "POST", "/v1/renew", `{"client": "", "lock": "L", "ttl": 10}`, lk.CodeInvalidArguments,
			[]string{"client must be a non-empty string"}},
		{"empty lock of inspect", "GET", "/v1/inspect?lock=", ``, lk.CodeInvalidArguments,
			[]string{"lock must be a non-empty string"}},
		{"missing ttl", "POST", "/v1/acquire", `{"client": "a", "lock": "L"}`, lk.CodeInvalidArguments,
			[]string{"ttl", "required"}},
		{"ttl 0", "POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 0}`, lk.CodeInvalidTTL,
			[]string{"ttl must be from 1 to 86400 seconds, got 0"}},
		{"ttl 86401", "POST", "/v1/renew", `{"client": "a", "lock": "L", "ttl": 86401}`, lk.CodeInvalidTTL,
			[]string{"ttl must be from 1 to 86400 seconds, got 86401"}},
		{"ttl 30.0", "POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 30.0}`, lk.CodeInvalidArguments,
			[]string{"ttl must be an integer", "30.0"}},
		{"bad mode", "POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "mode": "Shared"}`, lk.CodeInvalidArguments,
			[]string{"mode", `"shared"`, `"exclusive"`, `"Shared"`}},
		{"mode not a string", "POST", "/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10, "mode": 1}`, lk.CodeInvalidArguments,
			[]string{"mode", `"shared"`, `"exclusive"`}},
		{"token 0", "POST", "/v1/write", `{"lock": "L", "key": "k", "value": "v", "token": 0}`, lk.CodeInvalidArguments,
			[]string{"token must be an integer >= 1, got 0"}},
		{"unknown path under /v1/v1/", "POST", "/v1/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10}`, lk.CodeNotFound,
			[]string{"/v1/v1/acquire", "without /v1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, v := f.raw(c.method, c.path, c.body)
			expectError(t, status, v, c.code, c.says...)
		})
	}
	// A refused request changes nothing: no time used (the clock of
	// health is the last ts an operation ran at), no client registered,
	// no lock held.
	_, v := f.call("GET", "/v1/health", nil)
	expect(t, v, fmt.Sprintf(`{"status": "ok", "clock": null, "version": %q, "service_id": %q}`, lk.Version, f.eng.ServiceID()))
	_, v = f.call("GET", "/v1/status?client=a", nil)
	expect(t, v, `{"client": "a", "age": null, "holds": [], "waiting": null, "next": null}`)
	_, v = f.call("GET", "/v1/locks", nil)
	expect(t, v, `{"locks": [], "next": null}`)
}

// as reads a decoded answer strictly as an R.
func as[R any](t *testing.T, v any) R {
	t.Helper()
	b, _ := json.Marshal(v)
	r, err := decodeAs[R](b)
	if err != nil {
		t.Fatalf("%s is not a %T: %v", b, r, err)
	}
	return r
}

// TestLocksPaging: GET /v1/locks lists the locks with holders or waiters by
// name (byte order), a page at a time: 100 by default, next leading to the
// following page until every lock was shown once; prefix keeps the names
// that start with it; a limit beyond 1..1000 is refused.
func TestLocksPaging(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		// Names that share a prefix and one just outside it ('/' sorts
		// before '0' in bytes, not under a natural-language collation),
		// and an upper-case one, which bytes sort before lower case.
		names := []string{"a/1", "a/2", "a0", "b", "B"}
		for i := len(names); i < 250; i++ {
			names = append(names, fmt.Sprintf("lock-%03d", i))
		}
		holder := map[string]string{}
		for i := range names {
			name := names[i*7%len(names)] // not in name order
			holder[name] = fmt.Sprintf("c%03d", i)
			status, v := f.call("POST", "/v1/acquire", map[string]any{"client": holder[name], "lock": name, "ttl": 3600})
			if status != http.StatusOK {
				t.Fatalf("acquire %s: HTTP %d %v", name, status, v)
			}
		}
		// A waiter on b.
		_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "w", "lock": "b", "ttl": 10})
		expect(t, v, `{"outcome": "queued", "position": 1}`)
		sorted := append([]string(nil), names...)
		sort.Strings(sorted)

		// list follows the pages from query, and returns the names in
		// the order shown and each page's length.
		list := func(query string) (shown []string, pages []int) {
			t.Helper()
			after := ""
			for len(pages) <= len(names) {
				q := query
				if after != "" {
					q += "&after=" + url.QueryEscape(after)
				}
				status, v := f.call("GET", "/v1/locks?"+q, nil)
				if status != http.StatusOK {
					t.Fatalf("GET /v1/locks?%s: HTTP %d %v", q, status, v)
				}
				page := as[lk.LocksResult](t, v)
				pages = append(pages, len(page.Locks))
				for _, l := range page.Locks {
					shown = append(shown, l.Lock)
					waiting := int64(0)
					var oldest *int64
					if l.Lock == "b" {
						waiting, oldest = 1, new(int64(0))
					}
					want := lk.LockSummary{Lock: l.Lock, HolderCount: 1, Waiting: waiting, OldestWaitS: oldest, Holders: []lk.Holder{
						{Client: holder[l.Lock], Mode: lk.Exclusive, Token: 1, ExpiresAt: 4600}}}
					if !harness.Equal(l, want) {
						t.Errorf("GET /v1/locks?%s shows %+v, want %+v", q, l, want)
					}
				}
				if page.Next == nil {
					return shown, pages
				}
				if *page.Next == after {
					t.Fatalf("GET /v1/locks?%s: next is after again, %q", q, after)
				}
				after = *page.Next
			}
			t.Fatalf("GET /v1/locks?%s: more pages than locks", query)
			return nil, nil
		}

		shown, pages := list("")
		if fmt.Sprint(pages) != "[100 100 50]" {
			t.Errorf("pages of %v locks, want [100 100 50]", pages)
		}
		if !slices.Equal(shown, sorted) {
			t.Errorf("the pages showed %d locks:\n%q\nwant each of the %d once, in byte order:\n%q", len(shown), shown, len(sorted), sorted)
		}
		if shown, pages := list("limit=1000"); !slices.Equal(shown, sorted) || len(pages) != 1 {
			t.Errorf("limit=1000: pages %v of %q", pages, shown)
		}
		if shown, pages := list("limit=250"); !slices.Equal(shown, sorted) || len(pages) != 1 {
			t.Errorf("limit=250: pages %v of %q", pages, shown)
		}
		if shown, pages := list("limit=249"); !slices.Equal(shown, sorted) || fmt.Sprint(pages) != "[249 1]" {
			t.Errorf("limit=249: pages %v of %q", pages, shown)
		}

		for _, c := range []struct {
			query string
			want  []string
			pages string
		}{
			{"prefix=a", []string{"a/1", "a/2", "a0"}, "[3]"},
			{"prefix=a/", []string{"a/1", "a/2"}, "[2]"},
			{"prefix=a0", []string{"a0"}, "[1]"},
			{"prefix=b", []string{"b"}, "[1]"},
			{"prefix=B", []string{"B"}, "[1]"},
			{"prefix=lock-24", []string{"lock-240", "lock-241", "lock-242", "lock-243", "lock-244",
				"lock-245", "lock-246", "lock-247", "lock-248", "lock-249"}, "[10]"},
			{"prefix=lock-24&limit=4", []string{"lock-240", "lock-241", "lock-242", "lock-243", "lock-244",
				"lock-245", "lock-246", "lock-247", "lock-248", "lock-249"}, "[4 4 2]"},
			{"prefix=a&limit=1", []string{"a/1", "a/2", "a0"}, "[1 1 1]"},
			{"prefix=a&after=a/1", []string{"a/2", "a0"}, "[2]"},
			{"prefix=b&after=a", []string{"b"}, "[1]"},
			{"prefix=a&after=b", nil, "[0]"},
			{"prefix=zzz", nil, "[0]"},
			{"prefix=a1", nil, "[0]"},
		} {
			shown, pages := list(c.query)
			if !slices.Equal(shown, c.want) || fmt.Sprint(pages) != c.pages {
				t.Errorf("GET /v1/locks?%s: pages %v of %q, want pages %s of %q", c.query, pages, shown, c.pages, c.want)
			}
		}

		for _, limit := range []string{"1001", "0", "-1", "abc", "1.5"} {
			status, v := f.call("GET", "/v1/locks?limit="+limit, nil)
			expectError(t, status, v, lk.CodeInvalidArguments, "limit")
		}
	})
}

// TestHealthAndOpenAPI: health tells the server's version, and its clock
// once an operation ran; GET /v1/openapi.json answers the embedded
// document.
func TestHealthAndOpenAPI(t *testing.T) {
	f := start(t, 1000)
	if lk.Version == "" {
		t.Fatal("lk.Version is empty")
	}
	status, v := f.call("GET", "/v1/health", nil)
	if status != http.StatusOK {
		t.Errorf("health: HTTP %d", status)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(f.eng.ServiceID()) {
		t.Errorf("the service's identity %q is not 32 hex digits", f.eng.ServiceID())
	}
	expect(t, v, fmt.Sprintf(`{"status": "ok", "clock": null, "version": %q, "service_id": %q}`, lk.Version, f.eng.ServiceID()))
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	_, v = f.call("GET", "/v1/health", nil)
	expect(t, v, fmt.Sprintf(`{"status": "ok", "clock": 1000, "version": %q, "service_id": %q}`, lk.Version, f.eng.ServiceID()))

	resp, err := f.hc.Get(f.url + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /v1/openapi.json: HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(b, lk.OpenAPI) {
		t.Errorf("GET /v1/openapi.json answered %d bytes, not the embedded document's %d", len(b), len(lk.OpenAPI))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("GET /v1/openapi.json: not an OpenAPI 3 document (%v): %.200s", err, b)
	}
}

// TestClockNeverRunsBackwards: a clock stepped back, even across a restart
// on the same file, does not move the server's time back.
func TestClockNeverRunsBackwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock.db")
	f := startOn(t, path, 5000)
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, granted(1, 5000, 5010))
	f.clock.Set(time.Unix(4000, 0))
	_, v = f.call("POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	expect(t, v, `{"outcome": "renewed", "token": 1, "granted_at": 5000, "expires_at": 5010}`)
	// The identity is the database's: the same after the restart.
	health := fmt.Sprintf(`{"status": "ok", "clock": 5000, "version": %q, "service_id": %q}`, lk.Version, f.eng.ServiceID())
	_, v = f.call("GET", "/v1/health", nil)
	expect(t, v, health)

	f.stop()
	g := startOn(t, path, 4000) // restarted with the clock still behind
	_, v = g.call("GET", "/v1/health", nil)
	expect(t, v, health)
	_, v = g.call("POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 20})
	expect(t, v, `{"outcome": "renewed", "token": 1, "granted_at": 5000, "expires_at": 5020}`)
}

// TestConcurrentRequestsGroupCommit: hundreds of clients at once, every
// request answered (no database contention reaches anyone), every grant with
// its own token per lock.
func TestConcurrentRequestsGroupCommit(t *testing.T) {
	f := start(t, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	tokens := map[string]map[int64]bool{}
	const clients, rounds = 200, 5
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			lock := fmt.Sprintf("L%d", i%8)
			client := fmt.Sprintf("c%d", i)
			for j := 0; j < rounds; j++ {
				status, v := f.call("POST", "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 100, "mode": "shared"})
				b, _ := json.Marshal(v)
				res, err := decodeAs[lk.AcquireResult](b)
				if status != http.StatusOK || err != nil || res.Outcome != lk.Granted || res.Token < 1 {
					t.Errorf("shared acquire: HTTP %d %s", status, b)
					return
				}
				mu.Lock()
				if tokens[lock] == nil {
					tokens[lock] = map[int64]bool{}
				}
				if tokens[lock][res.Token] {
					t.Errorf("token %d of %s issued twice", res.Token, lock)
				}
				tokens[lock][res.Token] = true
				mu.Unlock()
				if _, v := f.call("POST", "/v1/release", map[string]any{"client": client, "lock": lock}); !harness.Equal(v, mustJSON(`{"outcome": "released"}`)) {
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
	want := mustJSON(`{"locks": [{"lock": "L", "holders": [{"client": "c", "mode": "exclusive", "token": 3, "expires_at": 630}], "waiting": 0, "holder_count": 1}], "next": null}`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, v := g.call("GET", "/v1/locks", nil)
		if harness.Equal(v, want) {
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
	expect(t, v, `{"outcome": "revoked"}`)
	expect(t, receive(t, ch), granted(2, 7, 37))
	status, v = f.call("POST", "/v1/revoke", map[string]any{"client": "a", "lock": "L"})
	expectError(t, status, v, lk.CodeNotHolder)
	_, v = f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "b", "token": 2})
	expect(t, v, `{"outcome": "ok"}`)
	status, v = f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "a", "token": 1})
	expectError(t, status, v, lk.CodeStaleToken)
	_, v = f.call("GET", "/v1/read?lock=L&key=k", nil)
	expect(t, v, `{"value": "b", "token": 2}`)
	status, v = f.call("POST", "/v1/revoke", map[string]any{"client": "", "lock": "L"})
	expectError(t, status, v, lk.CodeInvalidArguments, "client")
}

// denyAll refuses everything but health and the OpenAPI document, to check
// that every route asks.
type denyAll struct{ asked []server.Access }

func (d *denyAll) Authorize(r *http.Request, a server.Access) *server.Denial {
	d.asked = append(d.asked, a)
	if a.Op == "health" || a.Op == "openapi" {
		return nil
	}
	return &server.Denial{Code: lk.CodeForbidden, Message: "denyAll refuses " + a.Op}
}

// TestAuthorizerAsked: every route consults the Authorizer with its
// operation and client, and a refusal changes nothing.
func TestAuthorizerAsked(t *testing.T) {
	d := &denyAll{}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "auth.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: d, Metrics: http.NotFoundHandler()})
	hs := httptest.NewServer(srv.Handler())
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	f := &fixture{t: t, url: hs.URL, hc: validated(t)}
	for _, c := range []struct {
		method, path string
		body         map[string]any
		want         server.Access
	}{
		{"POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10}, server.Access{Op: "acquire", Client: "a"}},
		{"POST", "/v1/renew", map[string]any{"client": "a", "lock": "L", "ttl": 10}, server.Access{Op: "renew", Client: "a", Lock: "L"}},
		{"POST", "/v1/release", map[string]any{"client": "a", "lock": "L"}, server.Access{Op: "release", Client: "a", Lock: "L"}},
		{"POST", "/v1/revoke", map[string]any{"client": "a", "lock": "L"}, server.Access{Op: "revoke", Client: "a"}},
		{"POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "v", "token": 1}, server.Access{Op: "write"}},
		{"POST", "/v1/delete", map[string]any{"client": "a", "lock": "L", "key": "k", "token": 1}, server.Access{Op: "delete", Client: "a"}},
		{"POST", "/v1/store/clear", map[string]any{"lock": "L"}, server.Access{Op: "store_clear"}},
		{"GET", "/v1/read?lock=L&key=k", nil, server.Access{Op: "read"}},
		{"GET", "/v1/inspect?lock=L", nil, server.Access{Op: "inspect"}},
		{"GET", "/v1/status?client=a", nil, server.Access{Op: "status", Client: "a"}},
		{"GET", "/v1/locks", nil, server.Access{Op: "locks"}},
		{"GET", "/metrics", nil, server.Access{Op: "metrics"}},
	} {
		d.asked = nil
		status, v := f.call(c.method, c.path, c.body)
		expectError(t, status, v, lk.CodeForbidden, "denyAll refuses "+c.want.Op)
		if len(d.asked) != 1 || d.asked[0] != c.want {
			t.Errorf("%s %s asked %+v, want %+v", c.method, c.path, d.asked, c.want)
		}
	}
	for _, op := range []string{"health", "openapi"} {
		d.asked = nil
		path := map[string]string{"health": "/v1/health", "openapi": "/v1/openapi.json"}[op]
		if status, _ := f.call("GET", path, nil); status != http.StatusOK {
			t.Errorf("%s: HTTP %d", path, status)
		}
		if want := (server.Access{Op: op}); len(d.asked) != 1 || d.asked[0] != want {
			t.Errorf("GET %s asked %+v, want %+v", path, d.asked, want)
		}
	}
	if st, _ := eng.Status(context.Background(), lk.StatusRequest{Client: "a"}); st.Age != 0 {
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
			return f.eng.NextLapse() == 1005
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
		answered := make(chan struct{})
		go func() { // a group, waiting for the other writer
			defer close(answered)
			if resp, err := f.hc.Get(f.url + "/v1/status?client=x"); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
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
		<-answered
		conn.Close()
		other.Close()
	}
}

// TestInvalidUTF8QueryParameter: query parameters are text; bytes that are
// not UTF-8 are refused, naming the parameter, on both backends alike
// (PostgreSQL would refuse them, failing the whole group), and the server
// goes on serving (TestInvalidUTF8Names has bodies too).
func TestInvalidUTF8QueryParameter(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		f.call("POST", "/v1/acquire", map[string]any{"client": "caf\uFFFD", "lock": "L", "ttl": 100})
		status, v := f.call("GET", "/v1/status?client=caf%E9", nil)
		expectError(t, status, v, lk.CodeInvalidArguments, "client must be valid UTF-8")
		_, v = f.call("GET", "/v1/inspect?lock=L", nil)
		expect(t, v, `{"lock": "L", "holders": [{"client": "caf�", "mode": "exclusive", "token": 1, "expires_at": 1100}], "queue": [], "holder_count": 1, "queue_length": 0}`)
	})
}

// onEachDatabase runs fn as a subtest on a new SQLite file and on a fresh
// PostgreSQL schema; path is the database to start a server on.
func onEachDatabase(t *testing.T, fn func(t *testing.T, backend, path string)) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "server.db")
			if backend == "postgres" {
				path = pgtest.DSN(t)
			}
			fn(t, backend, path)
		})
	}
}
