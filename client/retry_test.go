package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// rateLimited is a stand-in server that answers the first `refusals`
// requests of each path 429 rate_limited with Retry-After: 1, as a server
// does for a principal over its limits, and the rest with answer(path). It
// records the bodies and times of the requests.
type rateLimited struct {
	refusals int
	answer   func(path string) string

	mu    sync.Mutex
	seen  map[string]int
	times map[string][]time.Time
	waits []int64 // the wait of each acquire
}

func (f *rateLimited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	if f.seen == nil {
		f.seen, f.times = map[string]int{}, map[string][]time.Time{}
	}
	f.seen[r.URL.Path]++
	n := f.seen[r.URL.Path]
	f.times[r.URL.Path] = append(f.times[r.URL.Path], time.Now())
	if r.URL.Path == "/v1/acquire" {
		var req struct{ Wait int64 }
		json.Unmarshal(body, &req)
		f.waits = append(f.waits, req.Wait)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	// renew and release are never rate-limited (docs/api.md).
	if n <= f.refusals && r.URL.Path != "/v1/renew" && r.URL.Path != "/v1/release" {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":"rate_limited","message":"principal etl is over its rate of 1 request per second"}`))
		return
	}
	w.Write([]byte(f.answer(r.URL.Path)))
}

func (f *rateLimited) calls(path string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.times[path]...)
}

const grantedAnswer = `{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`

func standIn(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// A 429 with Retry-After: 1 is retried a second later, and the retry's
// answer is the call's: for single requests (through do) and for Acquire.
func TestRateLimitedRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		call       func(ctx context.Context, c *client.Client) error
	}{
		{"read", "/v1/read", func(ctx context.Context, c *client.Client) error {
			res, err := c.Read(ctx, "L", "k")
			if err == nil && (res.Value == nil || *res.Value != "v") {
				return errors.New("not the retry's answer")
			}
			return err
		}},
		{"acquire-once", "/v1/acquire", func(ctx context.Context, c *client.Client) error {
			res, err := c.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second})
			if err == nil && res.Token != 7 {
				return errors.New("not the retry's answer")
			}
			return err
		}},
		{"write", "/v1/write", func(ctx context.Context, c *client.Client) error {
			_, err := c.Write(ctx, "L", "k", "v", 7)
			return err
		}},
		{"acquire", "/v1/acquire", func(ctx context.Context, c *client.Client) error {
			l, err := c.Acquire(ctx, "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second})
			if err == nil {
				l.Release(ctx)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &rateLimited{refusals: 1, answer: func(path string) string {
				switch path {
				case "/v1/read":
					return `{"value":"v","token":7}`
				case "/v1/acquire":
					return grantedAnswer
				case "/v1/renew":
					return `{"outcome":"renewed","token":7,"granted_at":1767225600,"expires_at":1767225630}`
				case "/v1/release":
					return `{"outcome":"released"}`
				}
				return `{"outcome":"ok"}`
			}}
			c := client.New(standIn(t, f), client.WithHTTPClient(validated(t, nil)))
			if err := tc.call(ctxT(t), c); err != nil {
				t.Fatalf("%s after one 429: %v", tc.name, err)
			}
			calls := f.calls(tc.path)
			if len(calls) != 2 {
				t.Fatalf("%d requests to %s, want 2 (a 429 and its retry)", len(calls), tc.path)
			}
			if d := calls[1].Sub(calls[0]); d < 900*time.Millisecond {
				t.Errorf("retried %v after the 429; Retry-After said 1s", d)
			}
		})
	}
}

// Acquire's retries after a 429 eat into its wait: the retry asks for what is
// left of it.
func TestRateLimitedAcquireShortensWait(t *testing.T) {
	t.Parallel()
	f := &rateLimited{refusals: 1, answer: func(path string) string {
		if path == "/v1/release" {
			return `{"outcome":"released"}`
		}
		return grantedAnswer
	}}
	c := client.New(standIn(t, f), client.WithHTTPClient(validated(t, nil)), client.WithRateLimitWait(0))
	l, err := c.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, Wait: 10 * time.Second})
	if err != nil {
		t.Fatalf("Acquire after a 429: %v", err)
	}
	l.Release(ctxT(t))
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waits) != 2 || f.waits[0] != 10 || f.waits[1] >= 10 || f.waits[1] < 1 {
		t.Errorf("the acquires asked to wait %v s; want 10, then what was left of it", f.waits)
	}
}

// The retries are bounded: by WithRateLimitWait, and by ctx's deadline; the
// last 429 is then the answer.
func TestRateLimitedBounded(t *testing.T) {
	t.Parallel()
	f := &rateLimited{refusals: 1 << 30, answer: func(string) string { return `{}` }}
	url := standIn(t, f)
	check := func(name string, err error, wantCalls int, path string) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, lk.ErrRateLimited) || !errors.As(err, &e) || e.Status != 429 || e.RetryAfter != time.Second {
			t.Errorf("%s: %v; want the 429 rate_limited with its Retry-After", name, err)
		}
		if n := len(f.calls(path)); n != wantCalls {
			t.Errorf("%s: %d requests to %s, want %d", name, n, path, wantCalls)
		}
	}
	none := client.New(url, client.WithHTTPClient(validated(t, nil)), client.WithRateLimitWait(0))
	_, err := none.Inspect(ctxT(t), "L")
	check("WithRateLimitWait(0)", err, 1, "/v1/inspect")

	// Short of the Retry-After (1 s), with as much room as that leaves for
	// the request itself on a busy machine.
	short, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
	defer cancel()
	dflt := client.New(url, client.WithHTTPClient(validated(t, nil)))
	_, err = dflt.Read(short, "L", "k")
	check("a ctx ending before the Retry-After", err, 1, "/v1/read")
	if short.Err() != nil {
		t.Error("the 429 was answered once the ctx had ended; want at once, as no retry can come before its end")
	}

	twice := client.New(url, client.WithHTTPClient(validated(t, nil)), client.WithRateLimitWait(1500*time.Millisecond))
	_, err = twice.Locks(ctxT(t), lk.LocksRequest{})
	check("WithRateLimitWait(1.5s)", err, 2, "/v1/locks")

	// Acquire: no withdraw after a 429, which says nothing happened.
	_, err = none.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second})
	check("Acquire", err, 1, "/v1/acquire")
	if n := len(f.calls("/v1/release")); n != 0 {
		t.Errorf("%d releases after an acquire answered 429; want none", n)
	}
}

// An acquire whose connection breaks may have left the client queued: Acquire
// withdraws it, sending the release again while the server answers 503
// (here twice), until it is confirmed.
func TestUnknownOutcomeWithdrawRetried(t *testing.T) {
	t.Parallel()
	var releases atomic.Int32
	url := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/acquire":
			// The server dies during the wait: the connection breaks
			// without an answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/v1/release":
			w.Header().Set("Content-Type", "application/json")
			if releases.Add(1) <= 2 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				w.Write([]byte(`{"error":"shutting_down","message":"the server is stopping"}`))
				return
			}
			w.Write([]byte(`{"outcome":"withdrawn"}`))
		}
	}))
	c := client.New(url, client.WithHTTPClient(validated(t, nil)))
	_, err := c.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, Wait: 30 * time.Second})
	var u *client.UnknownOutcomeError
	if !errors.As(err, &u) || u.WithdrawErr != nil || u.Client != "etl-a" || u.Lock != "L" {
		t.Fatalf("Acquire with a broken connection: %#v; want an *UnknownOutcomeError, withdrawn", err)
	}
	if n := releases.Load(); n != 3 {
		t.Errorf("%d releases; want 3 (two answered 503, the third withdrawn)", n)
	}
	t.Logf("Acquire: %v", err)
}

// The withdraw gives up after WithdrawFor when nothing answers, and says so.
func TestUnknownOutcomeWithdrawBounded(t *testing.T) {
	t.Parallel()
	var releases atomic.Int32
	url := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/release" {
			releases.Add(1)
		}
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	c := client.New(url)
	start := time.Now()
	_, err := c.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, WithdrawFor: 1500 * time.Millisecond})
	var u *client.UnknownOutcomeError
	if !errors.As(err, &u) || u.WithdrawErr == nil {
		t.Fatalf("Acquire against a server that never answers: %v; want an *UnknownOutcomeError whose withdraw failed", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Acquire returned after %v; WithdrawFor was 1.5s", d)
	}
	if n := releases.Load(); n < 2 {
		t.Errorf("%d releases in 1.5s; want the withdraw retried", n)
	}
	t.Logf("Acquire: %v (%d releases)", err, releases.Load())
}

// A connection that could not be made sent nothing: no withdraw, and the
// error is the dial's.
func TestUnsentAcquireNotWithdrawn(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = client.New("http://"+addr).Acquire(ctxT(t), "L", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, Wait: 30 * time.Second})
	var u *client.UnknownOutcomeError
	if err == nil || errors.As(err, &u) {
		t.Errorf("Acquire from a closed port: %v; want the dial's error, not an unknown outcome", err)
	}
}

// A base URL ending in /v1 reaches the server at its root.
func TestBaseURLWithV1(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, base := range []string{s.URL + "/v1", s.URL + "/v1/"} {
		c := client.New(base, client.WithHTTPClient(validated(t, nil)))
		if c.BaseURL() != s.URL {
			t.Errorf("New(%q).BaseURL() = %q, want %q", base, c.BaseURL(), s.URL)
		}
		if _, err := c.Inspect(ctxT(t), "L"); err != nil {
			t.Errorf("Inspect through %q: %v", base, err)
		}
	}
}
