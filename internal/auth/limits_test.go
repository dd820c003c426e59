package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
)

// The tokens of the limits tests' principals.
const (
	limitedToken = "lim-3c1e5a7b9d2f4a6c8e0b1d3f5a7c9e55"
	freeToken    = "fre-8b6d4f2a0c9e7b5d3f1a8c6e4b2d0f66"
)

// TestParseLimits: "rate", "max_waiting" and "max_streams" are optional integers from 1 to
// auth.MaxLimit; anything else stops the load with an error naming the
// principal, the field and what it got.
func TestParseLimits(t *testing.T) {
	file := func(limits string) string {
		return `{"principals": [
		  {"name": "etl", "token_sha256": "` + auth.HashToken(limitedToken) + `", "clients": ["etl-*"], "role": "client"` + limits + `},
		  {"name": "ops", "token_sha256": "` + auth.HashToken(adminToken) + `", "role": "admin"}
		]}`
	}
	ps, err := auth.Parse([]byte(file(`, "rate": 5, "max_waiting": 2, "max_streams": 3`)))
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Rate != 5 || ps[0].MaxWaiting != 2 || ps[0].MaxStreams != 3 || ps[1].Rate != 0 || ps[1].MaxWaiting != 0 || ps[1].MaxStreams != auth.DefaultMaxStreams {
		t.Errorf("parsed %+v", ps)
	}
	ps, err = auth.Parse([]byte(file(`, "rate": 1000000`)))
	if err != nil || ps[0].Rate != auth.MaxLimit || ps[0].MaxWaiting != 0 {
		t.Errorf("parsed %+v, %v", ps, err)
	}
	for _, key := range []string{"rate", "max_waiting", "max_streams", "max_queued"} {
		for _, bad := range []string{"-1", "0", "2.5", "5.0", "1e3", `"5"`, "null", "true", "[5]", "1000001", "99999999999999999999"} {
			_, err := auth.Parse([]byte(file(`, "` + key + `": ` + bad)))
			if err == nil {
				t.Errorf("%s %s: accepted", key, bad)
				continue
			}
			for _, want := range []string{`principal 1 ("etl")`, `"` + key + `" must be an integer from 1 to 1000000`, "got " + bad} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s %s: %q does not say %q", key, bad, err, want)
				}
			}
		}
	}
	// Through LoadFile, as serve reads it: the file's name comes first.
	name := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(name, []byte(file(`, "rate": -3`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadFile(name); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), `"rate"`) {
		t.Errorf("LoadFile: %v", err)
	}
}

// limitsEnv is a real server on loopback over a SQLite file, with an auth
// file of limits and the telemetry that serve uses.
type limitsEnv struct {
	url   string
	eng   *engine.Engine
	authz *auth.Authorizer
	hc    *http.Client // checks every answer against docs/openapi.json
	log   *syncBuffer
}

func startLimited(t *testing.T, file string) *limitsEnv {
	t.Helper()
	ps, err := auth.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	authz := auth.New(ps, slog.New(slog.NewTextHandler(buf, nil)))
	tel := telemetry.New(io.Discard, nil, telemetry.Options{})
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), engine.Options{Observer: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: authz, Observer: tel, Metrics: tel.Handler()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		eng.Drain()
		hs.Close()
		eng.Close()
	})
	tr := apitest.New(t).Transport(t, nil)
	return &limitsEnv{url: hs.URL, eng: eng, authz: authz, hc: &http.Client{Transport: tr}, log: buf}
}

// answer is one request's status, Retry-After and decoded body.
type answer struct {
	status     int
	retryAfter string
	body       map[string]any
}

func (e *limitsEnv) do(t *testing.T, ctx context.Context, token, method, path string, body any) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.Header.Get("Content-Type") == "application/json" {
		if err := json.NewDecoder(resp.Body).Decode(&a.body); err != nil {
			t.Errorf("%s %s: %v", method, path, err)
		}
	}
	return a, nil
}

func (e *limitsEnv) send(t *testing.T, token, method, path string, body any) answer {
	t.Helper()
	a, err := e.do(t, context.Background(), token, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// checkRateLimited checks a 429 answer: rate_limited, and a Retry-After of
// whole seconds, at least 1, which it returns.
func checkRateLimited(t *testing.T, a answer, says string) int {
	t.Helper()
	n, err := strconv.Atoi(a.retryAfter)
	if a.status != http.StatusTooManyRequests || a.body["error"] != string(lk.CodeRateLimited) || err != nil || n < 1 {
		t.Errorf("got HTTP %d Retry-After %q %v, want 429 rate_limited with Retry-After >= 1", a.status, a.retryAfter, a.body)
	}
	if msg, _ := a.body["message"].(string); !strings.Contains(msg, says) {
		t.Errorf("message %q does not say %q", msg, says)
	}
	return n
}

// TestRateLimit: a principal with "rate": 5 that sends 20 acquires at once
// gets 429 rate_limited with Retry-After for those beyond its burst; its
// renews and releases are never refused, even then; after the Retry-After it
// is served again; another principal, without limits, is not affected; the
// refusals are counted by principal in the metrics.
func TestRateLimit(t *testing.T) {
	e := startLimited(t, `{"principals": [
	  {"name": "etl", "token_sha256": "`+auth.HashToken(limitedToken)+`", "clients": ["etl-*"], "role": "client", "rate": 5},
	  {"name": "free", "token_sha256": "`+auth.HashToken(freeToken)+`", "clients": ["free-*"], "role": "client"},
	  {"name": "ops", "token_sha256": "`+auth.HashToken(adminToken)+`", "role": "admin"}
	]}`)
	burst := func(token, prefix string, n int) []answer {
		out := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				out[i] = e.send(t, token, "POST", "/v1/acquire",
					map[string]any{"client": fmt.Sprintf("%s-%d", prefix, i), "lock": fmt.Sprintf("L%d", i), "ttl": 60})
			})
		}
		wg.Wait()
		return out
	}
	answers := burst(limitedToken, "etl", 20)
	var granted []int
	limited, retry := 0, 0
	for i, a := range answers {
		switch a.status {
		case http.StatusOK:
			granted = append(granted, i)
		case http.StatusTooManyRequests:
			limited++
			retry = max(retry, checkRateLimited(t, a, "over its rate of 5 requests a second"))
		default:
			t.Errorf("acquire %d: HTTP %d %v", i, a.status, a.body)
		}
	}
	// The bucket holds 5, and refills at 5 a second: 20 requests sent at
	// once cannot all find a token.
	if len(granted) < 5 || limited == 0 {
		t.Fatalf("%d granted, %d rate-limited of 20: want at least the burst of 5 granted, and some refused", len(granted), limited)
	}

	// The bucket is empty now: renews and releases still pass, all of them.
	for range 3 {
		for _, i := range granted {
			a := e.send(t, limitedToken, "POST", "/v1/renew", map[string]any{"client": fmt.Sprintf("etl-%d", i), "lock": fmt.Sprintf("L%d", i), "ttl": 60})
			if a.status != http.StatusOK {
				t.Errorf("renew etl-%d: HTTP %d %v; renew is never rate-limited", i, a.status, a.body)
			}
		}
	}
	// A principal without limits is not affected by another's.
	for i, a := range burst(freeToken, "free", 40) {
		if a.status != http.StatusOK {
			t.Errorf("free acquire %d: HTTP %d %v; a principal without limits is never rate-limited", i, a.status, a.body)
		}
	}
	if a := e.send(t, limitedToken, "GET", "/v1/status?client=etl-0", nil); a.status == http.StatusTooManyRequests {
		limited++
		retry = max(retry, checkRateLimited(t, a, "retry after"))
	}
	for _, i := range granted {
		a := e.send(t, limitedToken, "POST", "/v1/release", map[string]any{"client": fmt.Sprintf("etl-%d", i), "lock": fmt.Sprintf("L%d", i)})
		if a.status != http.StatusOK {
			t.Errorf("release etl-%d: HTTP %d %v; release is never rate-limited", i, a.status, a.body)
		}
	}

	// After the Retry-After, served again: the bucket has refilled.
	time.Sleep(time.Duration(retry) * time.Second)
	if a := e.send(t, limitedToken, "POST", "/v1/acquire", map[string]any{"client": "etl-after", "lock": "L-after", "ttl": 60}); a.status != http.StatusOK {
		t.Errorf("acquire after Retry-After: HTTP %d %v", a.status, a.body)
	}

	// Counted by principal, not as auth failures.
	metrics := e.metrics(t)
	if want := fmt.Sprintf(`leasekeeper_rate_limited_total{principal="etl"} %d`, limited); !strings.Contains(metrics, want) {
		t.Errorf("the metrics lack %q:\n%s", want, grep(metrics, "rate_limited"))
	}
	if strings.Contains(metrics, `leasekeeper_auth_failures_total{status="429"}`) {
		t.Errorf("rate-limited requests counted as auth failures")
	}
	// Logged, but not each one.
	if n := strings.Count(e.log.String(), "rate limited"); n < 1 || limited > 2 && n >= limited {
		t.Errorf("%d log lines for %d rate-limited requests: want the first, and the rest left out", n, limited)
	}
	if strings.Contains(e.log.String(), limitedToken) {
		t.Errorf("a token reached the log")
	}
}

// metrics reads /metrics as the admin.
func (e *limitsEnv) metrics(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func grep(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMaxWaiting: with "max_waiting": 2, a third acquire with a wait is
// refused 429 while two of the principal's wait; an acquire without a wait
// is not limited; and a slot frees on every way a blocked acquire ends
// (its caller gone, its wait run out, granted, the server draining), so a
// new one is admitted once one is answered.
func TestMaxWaiting(t *testing.T) {
	e := startLimited(t, `{"principals": [
	  {"name": "etl", "token_sha256": "`+auth.HashToken(limitedToken)+`", "clients": ["etl-*"], "role": "client", "max_waiting": 2},
	  {"name": "ops", "token_sha256": "`+auth.HashToken(adminToken)+`", "role": "admin"}
	]}`)
	admin := func(path string, body any) answer {
		t.Helper()
		a := e.send(t, adminToken, "POST", path, body)
		if a.status != http.StatusOK {
			t.Fatalf("%s %v: HTTP %d %v", path, body, a.status, a.body)
		}
		return a
	}
	admin("/v1/acquire", map[string]any{"client": "holder", "lock": "L", "ttl": 600})
	type result struct {
		a   answer
		err error
	}
	blocked := func(ctx context.Context, client string, wait int) <-chan result {
		ch := make(chan result, 1)
		go func() {
			a, err := e.do(t, ctx, limitedToken, "POST", "/v1/acquire", map[string]any{"client": client, "lock": "L", "ttl": 60, "wait": wait})
			ch <- result{a, err}
		}()
		return ch
	}
	receive := func(ch <-chan result) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("a blocked acquire was not answered")
			return result{}
		}
	}
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if e.authz.Waiting("etl") == n {
				return
			}
		}
		t.Fatalf("etl has %d blocked acquires, want %d", e.authz.Waiting("etl"), n)
	}
	outcome := func(r result) any {
		if r.err != nil || r.a.status != http.StatusOK {
			t.Errorf("blocked acquire: %v HTTP %d %v", r.err, r.a.status, r.a.body)
		}
		return r.a.body["outcome"]
	}

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	chA := blocked(ctxA, "etl-a", 60)
	waitFor(1)
	chB := blocked(context.Background(), "etl-b", 60)
	waitFor(2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		a := e.send(t, adminToken, "GET", "/v1/inspect?lock=L", nil)
		if q, _ := a.body["queue"].([]any); len(q) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A and B never both queued: %v", a.body)
		}
	}

	// A third: refused, and it changed nothing.
	checkRateLimited(t, e.send(t, limitedToken, "POST", "/v1/acquire", map[string]any{"client": "etl-c", "lock": "L", "ttl": 60, "wait": 30}), "max_waiting")
	if a := e.send(t, adminToken, "GET", "/v1/inspect?lock=L", nil); len(a.body["queue"].([]any)) != 2 {
		t.Errorf("a refused acquire changed the queue: %v", a.body)
	}
	// Without a wait, not limited.
	if a := e.send(t, limitedToken, "POST", "/v1/acquire", map[string]any{"client": "etl-d", "lock": "L2", "ttl": 60, "wait": 0}); a.status != http.StatusOK {
		t.Errorf("acquire without a wait: HTTP %d %v", a.status, a.body)
	}

	// The caller of A goes away: its slot frees (its queue entry stays, as
	// for any caller gone: withdraw it).
	cancelA()
	if r := receive(chA); r.err == nil {
		t.Errorf("the cancelled acquire was answered: %+v", r.a)
	}
	waitFor(1)
	admin("/v1/release", map[string]any{"client": "etl-a", "lock": "L"})

	// C is admitted now; its wait runs out, and its slot is free by the time
	// its answer arrives.
	if o := outcome(receive(blocked(context.Background(), "etl-c", 1))); o != "queued" {
		t.Errorf("C: outcome %v, want queued once its wait ran out", o)
	}
	if n := e.authz.Waiting("etl"); n != 1 {
		t.Errorf("after C's answer, %d blocked acquires held, want 1 (B)", n)
	}

	// B is granted when the holder releases.
	admin("/v1/release", map[string]any{"client": "holder", "lock": "L"})
	if o := outcome(receive(chB)); o != "granted" {
		t.Errorf("B: outcome %v, want granted", o)
	}
	if n := e.authz.Waiting("etl"); n != 0 {
		t.Errorf("after B's grant, %d blocked acquires held, want 0", n)
	}

	// Two more wait (behind B, then C still queued), and the server
	// drains: both answered, both slots free.
	chE := blocked(context.Background(), "etl-e", 60)
	chF := blocked(context.Background(), "etl-f", 60)
	waitFor(2)
	checkRateLimited(t, e.send(t, limitedToken, "POST", "/v1/acquire", map[string]any{"client": "etl-g", "lock": "L", "ttl": 60, "wait": 30}), "max_waiting")
	e.eng.Drain()
	for _, ch := range []<-chan result{chE, chF} {
		if o := outcome(receive(ch)); o != "queued" {
			t.Errorf("drained: outcome %v, want queued", o)
		}
	}
	if n := e.authz.Waiting("etl"); n != 0 {
		t.Errorf("after draining, %d blocked acquires held, want 0", n)
	}
}

// TestNoLimits: without "rate" and "max_waiting", nothing is limited: many
// requests at once, and many blocked acquires of one principal.
func TestNoLimits(t *testing.T) {
	e := startLimited(t, `{"principals": [
	  {"name": "etl", "token_sha256": "`+auth.HashToken(limitedToken)+`", "clients": ["etl-*"], "role": "client"},
	  {"name": "ops", "token_sha256": "`+auth.HashToken(adminToken)+`", "role": "admin"}
	]}`)
	if a := e.send(t, adminToken, "POST", "/v1/acquire", map[string]any{"client": "holder", "lock": "L", "ttl": 600}); a.status != http.StatusOK {
		t.Fatalf("HTTP %d %v", a.status, a.body)
	}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			body := map[string]any{"client": fmt.Sprintf("etl-%d", i), "lock": "L", "ttl": 60, "wait": 1}
			if i%2 == 0 {
				body = map[string]any{"client": fmt.Sprintf("etl-%d", i), "lock": fmt.Sprintf("M%d", i), "ttl": 60}
			}
			if a := e.send(t, limitedToken, "POST", "/v1/acquire", body); a.status != http.StatusOK {
				t.Errorf("acquire %v: HTTP %d %v", body, a.status, a.body)
			}
		})
	}
	wg.Wait()
	if strings.Contains(e.metrics(t), "leasekeeper_rate_limited_total{") {
		t.Errorf("rate-limited requests counted without limits")
	}
}

// TestMaxQueued: a principal with "max_queued": 3 queues three clients with
// `wait: 0`; a fourth is refused 429 rate_limited and is not queued, while
// a client already queued is not refused for the bound; once one withdraws, the
// fourth gets in. Before max_queued, wait-0 acquires were bounded by
// nothing (issue 20).
func TestMaxQueued(t *testing.T) {
	e := startLimited(t, `{"principals": [
	  {"name": "etl", "token_sha256": "`+auth.HashToken(limitedToken)+`", "clients": ["etl-*"], "role": "client", "max_queued": 3},
	  {"name": "ops", "token_sha256": "`+auth.HashToken(adminToken)+`", "role": "admin"}
	]}`)
	if a := e.send(t, adminToken, "POST", "/v1/acquire", map[string]any{"client": "holder", "lock": "L", "ttl": 600}); a.status != 200 {
		t.Fatalf("holder: %d %v", a.status, a.body)
	}
	acquire := func(client string) answer {
		return e.send(t, limitedToken, "POST", "/v1/acquire", map[string]any{"client": client, "lock": "L", "ttl": 60, "wait": 0})
	}
	for i := 1; i <= 3; i++ {
		if a := acquire(fmt.Sprintf("etl-%d", i)); a.status != 200 || a.body["outcome"] != "queued" {
			t.Fatalf("etl-%d: %d %v", i, a.status, a.body)
		}
	}
	checkRateLimited(t, acquire("etl-4"), "max_queued")
	in := e.send(t, adminToken, "GET", "/v1/inspect?lock=L", nil)
	if q, _ := in.body["queue"].([]any); len(q) != 3 {
		t.Errorf("queue after the refusal: %v, want 3 waiters", in.body["queue"])
	}
	// A client already counted is not refused for the bound (the rules
	// answer it: it already waits).
	if a := acquire("etl-2"); a.status != http.StatusConflict || a.body["error"] != "client_busy" {
		t.Errorf("etl-2 again: %d %v, want 409 client_busy", a.status, a.body)
	}
	if a := e.send(t, limitedToken, "POST", "/v1/release", map[string]any{"client": "etl-1", "lock": "L"}); a.status != 200 {
		t.Fatalf("release: %d %v", a.status, a.body)
	}
	var a answer
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if a = acquire("etl-4"); a.status == 200 {
			break
		}
	}
	if a.status != 200 || a.body["outcome"] != "queued" {
		t.Errorf("etl-4 after a withdrawal: %d %v", a.status, a.body)
	}
	checkRateLimited(t, acquire("etl-5"), "max_queued")
}
