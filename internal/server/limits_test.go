package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// slots is an Authorizer and Admitter that allows everything but a request
// marked X-Test-Rate (refused as over a rate) and more than max blocked
// acquires at once, and counts what it is asked.
type slots struct {
	mu                 sync.Mutex
	max                int
	held               int
	admitted, released int
	asked              []server.Access
}

func (s *slots) Authorize(r *http.Request, a server.Access) *server.Denial {
	if r.Header.Get("X-Test-Rate") != "" {
		return &server.Denial{Code: lk.CodeRateLimited, Message: "slow down", RetryAfter: 2500 * time.Millisecond, Principal: "p"}
	}
	return nil
}

func (s *slots) Admit(r *http.Request, a server.Access) (func(), *server.Denial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, a)
	if s.held >= s.max {
		return nil, &server.Denial{Code: lk.CodeRateLimited, Message: "too many waiting", Principal: "p"}
	}
	s.held++
	s.admitted++
	// Not idempotent on purpose: the server must call it once.
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.held--
		s.released++
	}, nil
}

func (s *slots) state() (held, admitted, released, asked int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, s.admitted, s.released, len(s.asked)
}

// TestAdmitterSlots: the server asks an Admitter for a slot for each
// acquire with a wait (and for no other request), before the acquire runs;
// a refusal is 429 with Retry-After and changes nothing; and the slot is
// released exactly once, before the answer is written, on every way out:
// granted at once, refused by the service, the wait run out, the caller
// gone, the server draining. A Denial's RetryAfter is the answer's
// Retry-After in whole seconds, rounded up.
func TestAdmitterSlots(t *testing.T) {
	clock := engine.NewManualClock(time.Unix(1000, 0))
	sl := &slots{max: 1}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "slots.db"), engine.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: sl})
	hs := httptest.NewServer(srv.Handler())
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	f := &fixture{t: t, clock: clock, url: hs.URL, hc: validated(t)}

	type answer struct {
		status     int
		retryAfter string
		body       map[string]any
		err        error
	}
	send := func(ctx context.Context, body map[string]any, header ...string) answer {
		// Bounded, so that an acquire that blocks where it should be
		// refused fails the test rather than hangs it.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/acquire", bytes.NewReader(b))
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := f.hc.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		json.NewDecoder(resp.Body).Decode(&a.body)
		return a
	}
	async := func(ctx context.Context, body map[string]any) <-chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- send(ctx, body) }()
		return ch
	}
	get := func(ch <-chan answer) answer {
		t.Helper()
		select {
		case a := <-ch:
			return a
		case <-time.After(10 * time.Second):
			t.Fatal("a blocked acquire was not answered")
			return answer{}
		}
	}
	// expectSlots checks the counts the moment an answer has arrived: the
	// slot is free by then, not some time later.
	expectSlots := func(what string, held, admitted int) {
		t.Helper()
		h, a, r, _ := sl.state()
		if h != held || a != admitted || r != admitted-held {
			t.Errorf("%s: held %d, admitted %d, released %d; want held %d, admitted %d, released %d", what, h, a, r, held, admitted, admitted-held)
		}
	}

	// A Denial's RetryAfter, rounded up.
	a := send(context.Background(), map[string]any{"client": "x", "lock": "L", "ttl": 10}, "X-Test-Rate", "1")
	if a.status != http.StatusTooManyRequests || a.body["error"] != "rate_limited" || a.retryAfter != "3" {
		t.Errorf("rate-limited: HTTP %d Retry-After %q %v; want 429 rate_limited, Retry-After 3", a.status, a.retryAfter, a.body)
	}

	// Without a wait: not asked.
	if a := send(context.Background(), map[string]any{"client": "a", "lock": "L", "ttl": 100}); a.status != http.StatusOK {
		t.Fatalf("HTTP %d %v", a.status, a.body)
	}
	if _, _, _, asked := sl.state(); asked != 0 {
		t.Errorf("Admit asked for an acquire without a wait")
	}
	// Granted at once.
	if a := send(context.Background(), map[string]any{"client": "a", "lock": "M", "ttl": 100, "wait": 5}); a.body["outcome"] != "granted" {
		t.Errorf("HTTP %d %v", a.status, a.body)
	}
	expectSlots("granted at once", 0, 1)
	if want := (server.Access{Op: "acquire", Client: "a"}); len(sl.asked) != 1 || sl.asked[0] != want {
		t.Errorf("asked %+v, want %+v", sl.asked, want)
	}
	// Refused by the service: a holds M already.
	if a := send(context.Background(), map[string]any{"client": "a", "lock": "M", "ttl": 100, "wait": 5}); a.status != http.StatusConflict {
		t.Errorf("HTTP %d %v, want 409 client_busy", a.status, a.body)
	}
	expectSlots("client_busy", 0, 2)
	// The wait runs out.
	chB := async(context.Background(), map[string]any{"client": "b", "lock": "L", "ttl": 100, "wait": 5})
	f.waitQueued("b")
	// Over the one slot: 429, Retry-After 1 by default, and c is not queued.
	a = send(context.Background(), map[string]any{"client": "c", "lock": "L", "ttl": 100, "wait": 5})
	if a.status != http.StatusTooManyRequests || a.body["error"] != "rate_limited" || a.retryAfter != "1" {
		t.Errorf("over max: HTTP %d Retry-After %q %v; want 429 rate_limited, Retry-After 1", a.status, a.retryAfter, a.body)
	}
	_, v := f.call("GET", "/v1/inspect?lock=L", nil)
	expect(t, v, `{"lock": "L", "holders": [{"client": "a", "mode": "exclusive", "token": 1, "expires_at": 1100}], "queue": [{"client": "b", "mode": "exclusive", "position": 1}], "holder_count": 1, "queue_length": 1}`)
	clock.Set(time.Unix(1006, 0))
	if a := get(chB); a.body["outcome"] != "queued" {
		t.Errorf("HTTP %d %v, want queued", a.status, a.body)
	}
	expectSlots("wait ran out", 0, 3)
	f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
	// The caller goes away.
	ctx, cancel := context.WithCancel(context.Background())
	chD := async(ctx, map[string]any{"client": "d", "lock": "L", "ttl": 100, "wait": 600})
	f.waitQueued("d")
	cancel()
	if a := get(chD); a.err == nil {
		t.Errorf("answered after its caller went away: %+v", a)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if h, _, _, _ := sl.state(); h == 0 {
			break
		}
	}
	expectSlots("caller gone", 0, 4)
	f.call("POST", "/v1/release", map[string]any{"client": "d", "lock": "L"})
	// The server drains.
	chE := async(context.Background(), map[string]any{"client": "e", "lock": "L", "ttl": 100, "wait": 600})
	f.waitQueued("e")
	eng.Drain()
	if a := get(chE); a.body["outcome"] != "queued" {
		t.Errorf("HTTP %d %v, want queued", a.status, a.body)
	}
	expectSlots("draining", 0, 5)
}
