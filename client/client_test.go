package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// testServer is a real server on loopback over a SQLite file of its own.
// Its Client, and every client of validated, checks each answer against
// the OpenAPI document (internal/apitest).
type testServer struct {
	*client.Client
	URL   string
	close func()
}

func newServer(t *testing.T, clock engine.Clock) *testServer {
	t.Helper()
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), engine.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	ts := &testServer{Client: client.New(hs.URL, client.WithHTTPClient(validated(t, nil))), URL: hs.URL}
	closed := false
	ts.close = func() {
		if !closed {
			closed = true
			// answers blocked acquires, so that hs.Close need not wait for them
			hs.Close()
			eng.Close()
		}
	}
	t.Cleanup(ts.close)
	return ts
}

// validated is an HTTP client that sends through base (the default
// transport when nil) and checks every answer against the OpenAPI document.
func validated(t *testing.T, base http.RoundTripper) *http.Client {
	return &http.Client{Transport: apitest.New(t).Transport(t, base)}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// counting is a transport that counts the requests it sends on.
func counting(n *atomic.Int32) roundTripper {
	return func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func lostWithin(t *testing.T, l *client.Lease, limit time.Duration) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(limit):
		t.Fatalf("Lost not closed after %v", limit)
	}
}

// rawGet sends a GET for path (with its query) to the server through the
// validator and returns the status and the body.
func rawGet(t *testing.T, s *testServer, path string) (int, string) {
	t.Helper()
	return rawDo(t, s, http.MethodGet, path, "")
}

func rawDo(t *testing.T, s *testServer, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := validated(t, nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// str is a *string, for ReadResult.Value.
func str(s string) *string { return &s }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	before := time.Now().Truncate(time.Second)
	lease, err := s.Acquire(ctx, "exports/daily", client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Token() != 1 || lease.Lock() != "exports/daily" || lease.Client() != "etl-a" || len(lease.Victims()) != 0 {
		t.Errorf("lease: token %d lock %q client %q victims %v", lease.Token(), lease.Lock(), lease.Client(), lease.Victims())
	}
	if exp := lease.ExpiresAt(); exp.Before(before.Add(30*time.Second)) || exp.After(time.Now().Add(30*time.Second)) {
		t.Errorf("ExpiresAt %v, want 30s from now", exp)
	}
	if g := lease.GrantedAt(); g.Before(before) || g.After(time.Now()) || !g.Add(30*time.Second).Equal(lease.ExpiresAt()) {
		t.Errorf("GrantedAt %v, want now, 30s before ExpiresAt %v", g, lease.ExpiresAt())
	}

	r, err := s.Renew(ctx, "etl-a", "exports/daily", 60*time.Second)
	if err != nil || r.Outcome != lk.Renewed || r.Token != 1 || r.GrantedAt != lease.GrantedAt().Unix() || r.ExpiresAt < before.Add(60*time.Second).Unix() {
		t.Errorf("Renew = %+v, %v; want renewed, token 1, granted at %d, expiring 60s from now", r, err, lease.GrantedAt().Unix())
	}
	if err := lease.Write(ctx, "part-1", "rows 1-100"); err != nil {
		t.Errorf("Write: %v", err)
	}
	if w, err := s.Write(ctx, "exports/daily", "part-2", "rows 101-200", lease.Token()); err != nil || w != (lk.WriteResult{Outcome: lk.OK}) {
		t.Errorf("Client.Write = %+v, %v", w, err)
	}
	if v, err := s.Read(ctx, "exports/daily", "part-1"); err != nil || v.Value == nil || *v.Value != "rows 1-100" || v.Token != 1 {
		t.Errorf("Read part-1 = %+v, %v", v, err)
	}
	if v, err := s.Read(ctx, "exports/daily", "part-9"); err != nil || v.Value != nil || v.Token != 0 {
		t.Errorf("Read part-9 = %+v, %v; want a nil value", v, err)
	}

	st, err := s.Inspect(ctx, "exports/daily")
	if err != nil || st.Lock != "exports/daily" || len(st.Holders) != 1 || len(st.Queue) != 0 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	if h, want := st.Holders[0], (lk.Holder{Client: "etl-a", Mode: lk.Exclusive, Token: 1, ExpiresAt: r.ExpiresAt}); h != want {
		t.Errorf("holder %+v, want %+v", h, want)
	}
	cs, err := s.Status(ctx, "etl-a")
	if err != nil || cs.Client != "etl-a" || cs.Age != 1 || cs.Waiting != nil || len(cs.Holds) != 1 ||
		cs.Holds[0] != (lk.Holder{Lock: "exports/daily", Mode: lk.Exclusive, Token: 1, ExpiresAt: r.ExpiresAt}) {
		t.Errorf("Status = %+v, %v", cs, err)
	}
	if cs, err := s.Status(ctx, "nobody"); err != nil || cs.Client != "nobody" || cs.Age != 0 || len(cs.Holds) != 0 || cs.Waiting != nil {
		t.Errorf("Status(nobody) = %+v, %v", cs, err)
	}
	ls, err := s.Locks(ctx, lk.LocksRequest{})
	if err != nil || len(ls.Locks) != 1 || ls.Next != nil || ls.Locks[0].Lock != "exports/daily" || len(ls.Locks[0].Holders) != 1 ||
		ls.Locks[0].Holders[0] != st.Holders[0] || ls.Locks[0].Waiting != 0 {
		t.Errorf("Locks = %+v, %v", ls, err)
	}
	h, err := s.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version != lk.Version || h.Clock == nil || *h.Clock < before.Unix() {
		t.Errorf("Health = %+v, %v", h, err)
	}

	// The wire form the typed results are decoded from.
	if status, body := rawGet(t, s, "/v1/read?lock=exports/daily&key=part-2"); status != http.StatusOK || body != `{"value":"rows 101-200","token":1}` {
		t.Errorf("GET /v1/read = %d %s", status, body)
	}
	if status, body := rawGet(t, s, "/v1/read?lock=exports/daily&key=part-9"); status != http.StatusOK || body != `{"value":null}` {
		t.Errorf("GET /v1/read of a missing key = %d %s", status, body)
	}

	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-lease.Lost():
	default:
		t.Error("Lost not closed by Release")
	}
	if !errors.Is(lease.Err(), client.ErrReleased) {
		t.Errorf("Err after Release = %v", lease.Err())
	}
	if err := lease.Release(ctx); err != nil {
		t.Errorf("second Release = %v, want the first's nil", err)
	}
	if st, err := s.Inspect(ctx, "exports/daily"); err != nil || len(st.Holders) != 0 || len(st.Queue) != 0 {
		t.Errorf("Inspect after Release = %+v, %v", st, err)
	}
	if ls, err := s.Locks(ctx, lk.LocksRequest{}); err != nil || len(ls.Locks) != 0 || ls.Next != nil {
		t.Errorf("Locks after Release = %+v, %v", ls, err)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)

	check := func(name string, err, want error, status int) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, want) || !errors.As(err, &e) || e.Status != status || e.Code != lk.CodeOf(want) {
			t.Errorf("%s: %v, want %v with HTTP %d", name, err, want, status)
		}
	}
	// message checks that err carries the server's message.
	message := func(name string, err error, want string) {
		t.Helper()
		var e *client.Error
		if !errors.As(err, &e) || e.Message != want || e.Error() != e.Code.Text()+": "+want {
			t.Errorf("%s: %#v, want the message %q", name, err, want)
		}
	}
	_, err = s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	check("acquire again", err, client.ErrClientBusy, 409)
	check("acquire again (package leasekeeper's sentinel)", err, lk.ErrClientBusy, 409)
	_, err = s.Acquire(ctx, "M", client.AcquireOptions{Client: "a", TTL: 0})
	check("ttl 0", err, client.ErrInvalidTTL, 400)
	message("ttl 0", err, "ttl must be from 1 to 86400 seconds, got 0")
	_, err = s.Acquire(ctx, "M", client.AcquireOptions{Client: "", TTL: time.Second})
	check("no client", err, client.ErrInvalidArguments, 400)
	message("no client", err, "client must be a non-empty string")
	_, err = s.Acquire(ctx, strings.Repeat("x", 257), client.AcquireOptions{Client: "a", TTL: time.Second})
	check("long lock", err, client.ErrInvalidArguments, 400)
	message("long lock", err, "lock is longer than 256 bytes")
	_, err = s.Renew(ctx, "b", "L", 30*time.Second)
	check("renew by a stranger", err, client.ErrNotHolder, 409)
	_, err = s.Release(ctx, "b", "L")
	check("release by a stranger", err, client.ErrNotHolder, 409)
	_, err = s.Revoke(ctx, "b", "L")
	check("revoke of a stranger", err, client.ErrNotHolder, 409)

	if _, err := s.Write(ctx, "L", "k", "v", 5); err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, "L", "k", "v", 4)
	check("stale write", err, client.ErrStaleToken, 409)
	_, err = s.Write(ctx, "L", "k", "v", 0)
	check("token 0", err, client.ErrInvalidArguments, 400)
	message("token 0", err, "token must be an integer >= 1, got 0")

	// A path the server does not have: the client under a wrong base URL.
	_, err = client.New(s.URL+"/nothing", client.WithHTTPClient(validated(t, nil))).Inspect(ctx, "L")
	check("unknown path", err, client.ErrNotFound, 404)
	status, body := rawGet(t, s, "/v1/nothing")
	var e lk.Error
	if err := json.Unmarshal([]byte(body), &e); status != 404 || err != nil || e.Code != lk.CodeNotFound || e.Message == "" {
		t.Errorf("GET /v1/nothing = %d %s, want 404 with a not_found error object", status, body)
	}
	status, body = rawGet(t, s, "/v1/acquire")
	if err := json.Unmarshal([]byte(body), &e); status != 405 || err != nil || e.Code != lk.CodeMethodNotAllowed || e.Message == "" {
		t.Errorf("GET /v1/acquire = %d %s, want 405 with a method_not_allowed error object", status, body)
	}

	// Queued with no wait: Acquire withdraws, so b is not left queued.
	_, err = s.Acquire(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second})
	var q *client.QueuedError
	if !errors.Is(err, client.ErrQueued) || !errors.As(err, &q) || q.Position != 1 {
		t.Errorf("acquire of a held lock: %v, want ErrQueued at position 1", err)
	}
	if cs, err := s.Status(ctx, "b"); err != nil || cs.Waiting != nil {
		t.Errorf("b after a queued Acquire: %+v, %v; want not waiting", cs, err)
	}
	// AcquireOnce leaves it queued, as the API does.
	res, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second, Shared: true})
	if err != nil || res.Outcome != lk.Queued || res.Position != 1 || len(res.Victims) != 0 {
		t.Errorf("AcquireOnce = %+v, %v; want queued at 1", res, err)
	}
	if st, err := s.Inspect(ctx, "L"); err != nil || len(st.Queue) != 1 || st.Queue[0] != (lk.Waiter{Client: "b", Mode: lk.Shared, Position: 1}) {
		t.Errorf("Inspect = %+v, %v", st, err)
	}
	if cs, err := s.Status(ctx, "b"); err != nil || cs.Waiting == nil || *cs.Waiting != (lk.WaitingFor{Lock: "L", Position: 1}) {
		t.Errorf("Status(b) = %+v, %v; want waiting for L at 1", cs, err)
	}
	if out, err := s.Release(ctx, "b", "L"); out.Outcome != lk.Withdrawn || err != nil {
		t.Errorf("Release of a waiter = %+v, %v", out, err)
	}
}

// A TTL or a wait that is not whole seconds is refused before anything is
// sent: an *Error of Status 0 and Code invalid_arguments.
func TestWholeSeconds(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	var sent atomic.Int32
	c := client.New(s.URL, client.WithHTTPClient(validated(t, counting(&sent))))
	refused := func(name string, err error, field string) {
		t.Helper()
		var e *client.Error
		if !errors.Is(err, client.ErrInvalidArguments) || !errors.As(err, &e) || e.Status != 0 || e.Code != lk.CodeInvalidArguments ||
			!strings.HasPrefix(e.Message, field+" must be a whole number of seconds") {
			t.Errorf("%s: %#v, want invalid_arguments refused locally (Status 0) about %s", name, err, field)
		}
	}
	_, err := c.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 1500 * time.Millisecond})
	refused("Acquire, ttl 1.5s", err, "ttl")
	_, err = c.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "a", TTL: 1500 * time.Millisecond})
	refused("AcquireOnce, ttl 1.5s", err, "ttl")
	_, err = c.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second, Wait: 500 * time.Millisecond})
	refused("AcquireOnce, wait 0.5s", err, "wait")
	_, err = c.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second, Wait: 2500 * time.Millisecond})
	refused("Acquire, wait 2.5s", err, "wait")
	_, err = c.Renew(ctx, "a", "L", time.Second+time.Nanosecond)
	refused("Renew, ttl 1.000000001s", err, "ttl")
	if n := sent.Load(); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
	if st, err := s.Status(ctx, "a"); err != nil || st.Age != 0 {
		t.Errorf("Status(a) = %+v, %v; want a unknown to the server", st, err)
	}
}

// client.Error carries the status, the code and the message of the
// server's error object, and its Retry-After.
func TestErrorObject(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/write":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"error":"stale_token","message":"token 4 is below 5, the highest accepted for L"}`)
		case "/v1/status":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"unavailable","message":"the database is unreachable"}`)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "bad gateway\n")
		}
	}))
	defer hs.Close()
	ctx := ctxT(t)
	c := client.New(hs.URL)

	_, err := c.Write(ctx, "L", "k", "v", 4)
	var e *client.Error
	if !errors.As(err, &e) || *e != (client.Error{Status: 409, Code: lk.CodeStaleToken, Message: "token 4 is below 5, the highest accepted for L"}) {
		t.Errorf("Write: %#v", err)
	}
	if !errors.Is(err, client.ErrStaleToken) || errors.Is(err, client.ErrNotHolder) {
		t.Errorf("Write: %v is not ErrStaleToken alone", err)
	}
	if got, want := err.Error(), "stale token: token 4 is below 5, the highest accepted for L"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}

	_, err = c.Status(ctx, "a")
	if !errors.As(err, &e) || *e != (client.Error{Status: 503, Code: lk.CodeUnavailable, Message: "the database is unreachable", RetryAfter: 3 * time.Second}) {
		t.Errorf("Status: %#v", err)
	}
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, lk.ErrUnavailable) {
		t.Errorf("Status: %v is not ErrUnavailable", err)
	}

	// What is not an error object has no code, and matches no sentinel.
	_, err = c.Inspect(ctx, "L")
	if !errors.As(err, &e) || e.Status != 502 || e.Code != "" || !strings.Contains(e.Message, "bad gateway") {
		t.Errorf("Inspect: %#v", err)
	}
	for _, sentinel := range []error{client.ErrInternal, client.ErrUnavailable, client.ErrNotFound} {
		if errors.Is(err, sentinel) {
			t.Errorf("Inspect: %v matches %v", err, sentinel)
		}
	}
}

// AcquireOnce sends one request and returns every outcome as data:
// granted, queued, deadlock, withdrawn.
func TestAcquireOnce(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := engine.NewManualClock(time.Unix(1767225600, 0))
	s := newServer(t, clock)
	once := func(c, lock string, shared bool) (lk.AcquireResult, error) {
		return s.AcquireOnce(ctx, lock, client.AcquireOptions{Client: c, TTL: 30 * time.Second, Shared: shared})
	}
	want := func(name string, got lk.AcquireResult, err error, want lk.AcquireResult) {
		t.Helper()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %+v, %v; want %+v", name, got, err, want)
		}
	}
	res, err := once("a", "L1", false)
	want("a acquires L1", res, err, lk.AcquireResult{Outcome: lk.Granted, Token: 1, GrantedAt: 1767225600, ExpiresAt: 1767225630})
	clock.Advance(time.Second)
	res, err = once("b", "S", true)
	want("b acquires S shared", res, err, lk.AcquireResult{Outcome: lk.Granted, Token: 1, GrantedAt: 1767225601, ExpiresAt: 1767225631})
	res, err = once("c", "S", true)
	want("c shares S", res, err, lk.AcquireResult{Outcome: lk.Granted, Token: 2, GrantedAt: 1767225601, ExpiresAt: 1767225631})
	res, err = once("d", "L1", false)
	want("d queues for L1", res, err, lk.AcquireResult{Outcome: lk.Queued, Position: 1})
	res, err = once("e", "L1", true)
	want("e queues for L1", res, err, lk.AcquireResult{Outcome: lk.Queued, Position: 2})
	// The queued clients stay queued: one request, nothing withdrawn.
	if st, err := s.Inspect(ctx, "L1"); err != nil || len(st.Queue) != 2 {
		t.Errorf("L1 = %+v, %v; want d and e queued", st, err)
	}
	// An error answer is an error, not an outcome.
	if res, err := once("d", "L3", false); !errors.Is(err, client.ErrClientBusy) || res.Outcome != "" {
		t.Errorf("a queued client acquires again: %+v, %v; want ErrClientBusy", res, err)
	}

	// x (the older) waits for y's Y; y asking for x's X closes the cycle,
	// and y, the younger, is aborted: its own answer is deadlock, and its
	// lease on Y goes to x.
	res, err = once("x", "X", false)
	want("x acquires X", res, err, lk.AcquireResult{Outcome: lk.Granted, Token: 1, GrantedAt: 1767225601, ExpiresAt: 1767225631})
	res, err = once("y", "Y", false)
	want("y acquires Y", res, err, lk.AcquireResult{Outcome: lk.Granted, Token: 1, GrantedAt: 1767225601, ExpiresAt: 1767225631})
	res, err = once("x", "Y", false)
	want("x queues for Y", res, err, lk.AcquireResult{Outcome: lk.Queued, Position: 1})
	res, err = once("y", "X", false)
	if len(res.Aborts) != 1 || *res.Aborts[0].Victim != "y" || len(res.Aborts[0].Cycle) != 2 {
		t.Errorf("y closes the cycle: aborts %+v; want y's, with x and y", res.Aborts)
	}
	res.Aborts = nil // compared above: pointers do not print as values
	want("y closes the cycle", res, err, lk.AcquireResult{Outcome: lk.Deadlock, Victims: []string{"y"}})
	if cs, err := s.Status(ctx, "y"); err != nil || len(cs.Holds) != 0 || cs.Waiting != nil {
		t.Errorf("y after its abort: %+v, %v; want neither holding nor waiting", cs, err)
	}
	if cs, err := s.Status(ctx, "x"); err != nil || len(cs.Holds) != 2 || cs.Waiting != nil {
		t.Errorf("x after y's abort: %+v, %v; want X and Y held", cs, err)
	}

	// Withdrawn: a waiting request released from elsewhere.
	got := make(chan lk.AcquireResult, 1)
	go func() {
		res, err := s.AcquireOnce(ctx, "X", client.AcquireOptions{Client: "w", TTL: 30 * time.Second, Wait: 10 * time.Second})
		if err != nil {
			t.Errorf("w's waiting AcquireOnce: %v", err)
		}
		got <- res
	}()
	testutil.Eventually(t, 5*time.Second, "w queued on X", func() bool {
		cs, err := s.Status(ctx, "w")
		return err == nil && cs.Waiting != nil && cs.Waiting.Lock == "X"
	})
	if out, err := s.Release(ctx, "w", "X"); err != nil || out.Outcome != lk.Withdrawn {
		t.Fatalf("release of w's request: %+v, %v", out, err)
	}
	select {
	case res := <-got:
		want("w's waiting AcquireOnce", res, nil, lk.AcquireResult{Outcome: lk.Withdrawn})
	case <-time.After(5 * time.Second):
		t.Fatal("w's waiting AcquireOnce not answered")
	}
}

// Locks answers one page; AllLocks follows the pages to the last.
func TestLocksPaging(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	// 150 locks a/000..a/149 held, b/0 held with a waiter, c/0 held.
	var names []string
	for i := range 150 {
		names = append(names, fmt.Sprintf("a/%03d", i))
	}
	for _, n := range append(names, "b/0", "c/0") {
		if _, err := s.AcquireOnce(ctx, n, client.AcquireOptions{Client: "holder-" + n, TTL: 60 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.AcquireOnce(ctx, "b/0", client.AcquireOptions{Client: "waiter", TTL: 60 * time.Second}); err != nil || res.Outcome != lk.Queued {
		t.Fatalf("waiter queues for b/0: %+v, %v", res, err)
	}

	page, err := s.Locks(ctx, lk.LocksRequest{Limit: 2})
	if err != nil || len(page.Locks) != 2 || page.Locks[0].Lock != "a/000" || page.Locks[1].Lock != "a/001" || page.Next == nil || *page.Next != "a/001" {
		t.Fatalf("Locks(limit 2) = %+v, %v", page, err)
	}
	if l := page.Locks[0]; len(l.Holders) != 1 || l.Holders[0].Client != "holder-a/000" || l.Holders[0].Token != 1 || l.Waiting != 0 {
		t.Errorf("a/000 = %+v", l)
	}
	page, err = s.Locks(ctx, lk.LocksRequest{After: *page.Next, Limit: 2})
	if err != nil || len(page.Locks) != 2 || page.Locks[0].Lock != "a/002" || page.Next == nil || *page.Next != "a/003" {
		t.Errorf("Locks(after a/001, limit 2) = %+v, %v", page, err)
	}
	page, err = s.Locks(ctx, lk.LocksRequest{After: "a/149", Limit: 2})
	if err != nil || len(page.Locks) != 2 || page.Locks[0].Lock != "b/0" || page.Locks[0].Waiting != 1 || page.Locks[1].Lock != "c/0" || page.Next != nil {
		t.Errorf("Locks(after a/149, limit 2) = %+v, %v; want b/0 and c/0, the last page", page, err)
	}
	page, err = s.Locks(ctx, lk.LocksRequest{Prefix: "b/"})
	if err != nil || len(page.Locks) != 1 || page.Locks[0].Lock != "b/0" || page.Next != nil {
		t.Errorf("Locks(prefix b/) = %+v, %v", page, err)
	}
	page, err = s.Locks(ctx, lk.LocksRequest{})
	if err != nil || len(page.Locks) != lk.DefaultLocksLimit || page.Next == nil || *page.Next != names[lk.DefaultLocksLimit-1] {
		t.Errorf("Locks() = %d locks, next %v, %v; want the default page of %d", len(page.Locks), page.Next, err, lk.DefaultLocksLimit)
	}
	page, err = s.Locks(ctx, lk.LocksRequest{Limit: lk.MaxLocksLimit})
	if err != nil || len(page.Locks) != 152 || page.Next != nil {
		t.Errorf("Locks(limit %d) = %d locks, next %v, %v; want all 152", lk.MaxLocksLimit, len(page.Locks), page.Next, err)
	}
	_, err = s.Locks(ctx, lk.LocksRequest{Limit: lk.MaxLocksLimit + 1})
	var e *client.Error
	if !errors.Is(err, client.ErrInvalidArguments) || !errors.As(err, &e) || e.Status != 400 || e.Message != "limit must be from 1 to 1000, got 1001" {
		t.Errorf("Locks(limit 1001): %v, want invalid_arguments (400)", err)
	}

	all := func(prefix string) ([]string, error) {
		var got []string
		for l, err := range s.AllLocks(ctx, prefix) {
			if err != nil {
				return got, err
			}
			got = append(got, l.Lock)
		}
		return got, nil
	}
	got, err := all("")
	if want := append(append([]string{}, names...), "b/0", "c/0"); err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("AllLocks(\"\") = %d locks %v, %v; want the 152 in name order", len(got), got, err)
	}
	got, err = all("a/")
	if err != nil || strings.Join(got, " ") != strings.Join(names, " ") {
		t.Errorf("AllLocks(a/) = %d locks, %v; want a/000..a/149", len(got), err)
	}
	got, err = all("c/")
	if err != nil || len(got) != 1 || got[0] != "c/0" {
		t.Errorf("AllLocks(c/) = %v, %v", got, err)
	}
	got, err = all("z/")
	if err != nil || len(got) != 0 {
		t.Errorf("AllLocks(z/) = %v, %v; want none", got, err)
	}
	// The caller may stop early.
	n := 0
	for _, err := range s.AllLocks(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	// An error ends the sequence, after what was read.
	s.close()
	got, err = all("")
	if err == nil || len(got) != 0 {
		t.Errorf("AllLocks of a closed server = %v, %v; want an error", got, err)
	}
}

// A waiting Acquire is granted when the holder releases, with the next token.
// The release comes after more than a second, so that the lease's first
// renew goes out at once (the grant came from the queue) and must succeed.
func TestWaitGranted(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	a, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		l   *client.Lease
		err error
	}
	got := make(chan result, 1)
	var renews atomic.Int32
	counting := client.New(s.URL, client.WithHTTPClient(validated(t, roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/v1/renew" {
			renews.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	}))))
	go func() {
		l, err := counting.Acquire(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second, Wait: 10 * time.Second})
		got <- result{l, err}
	}()
	testutil.Eventually(t, 5*time.Second, "b queued on L", func() bool {
		st, err := s.Inspect(ctx, "L")
		return err == nil && len(st.Queue) == 1
	})
	time.Sleep(1200 * time.Millisecond)
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiting Acquire: %v", r.err)
		}
		if r.l.Token() != 2 {
			t.Errorf("token %d, want 2", r.l.Token())
		}
		testutil.Eventually(t, 3*time.Second, "the first renew", func() bool { return renews.Load() > 0 })
		if err := r.l.Err(); err != nil {
			t.Errorf("lease lost after a waited grant: %v", err)
		}
		if err := r.l.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Acquire not answered 5s after the release")
	}
}

// An Acquire whose ctx ends during the wait withdraws its request.
func TestWaitCancelledWithdraws(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	a, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = s.Acquire(short, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second, Wait: 10 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire with an ending ctx: %v", err)
	}
	if st, err := s.Inspect(ctx, "L"); err != nil || len(st.Queue) != 0 {
		t.Errorf("queue after the cancelled Acquire: %+v, %v; want empty", st, err)
	}
}

// b waits for L1 (held by a) while holding L2; a's acquire of L2 closes the
// cycle, and b, the younger, is aborted: its wait answers ErrDeadlock, its
// lease on L2 is lost, and a gets L2 with b among its victims.
func TestDeadlock(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	opts := func(c string) client.AcquireOptions {
		return client.AcquireOptions{Client: c, TTL: 3 * time.Second}
	}
	a1, err := s.Acquire(ctx, "L1", opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Release(ctx)
	b2, err := s.Acquire(ctx, "L2", opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		o := opts("b")
		o.Wait = 10 * time.Second
		_, err := s.Acquire(ctx, "L1", o)
		waited <- err
	}()
	testutil.Eventually(t, 5*time.Second, "b queued on L1", func() bool {
		cs, err := s.Status(ctx, "b")
		return err == nil && cs.Waiting != nil && cs.Waiting.Lock == "L1"
	})
	a2, err := s.Acquire(ctx, "L2", opts("a"))
	if err != nil {
		t.Fatalf("a's acquire of L2: %v", err)
	}
	defer a2.Release(ctx)
	if v := a2.Victims(); len(v) != 1 || v[0] != "b" {
		t.Errorf("victims %v, want [b]", v)
	}
	select {
	case err := <-waited:
		var d *client.DeadlockError
		if !errors.Is(err, client.ErrDeadlock) || !errors.As(err, &d) || len(d.Victims) != 1 || d.Victims[0] != "b" {
			t.Errorf("b's wait: %v, want ErrDeadlock [b]", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b's wait not answered")
	}
	lostWithin(t, b2, 3*time.Second)
	if !errors.Is(b2.Err(), client.ErrNotHolder) {
		t.Errorf("b's L2 lease: Err %v, want ErrNotHolder", b2.Err())
	}
	if err := b2.Release(ctx); !errors.Is(err, client.ErrNotHolder) {
		t.Errorf("Release of a lost lease = %v, want ErrNotHolder", err)
	}
}

// The keep-alive holds a 3-second lease through 6 seconds. (A lease of 2 s
// leaves each renew a third of a second before the lease counts as lost:
// too little on a busy machine, under -race.)
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Lost():
		t.Fatalf("lost after %v: %v", time.Since(lease.ExpiresAt().Add(-3*time.Second)), lease.Err())
	case <-time.After(6 * time.Second):
	}
	st, err := s.Inspect(ctx, "L")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != 1 || st.Holders[0].ExpiresAt <= time.Now().Add(-time.Second).Unix() {
		t.Errorf("Inspect after 6s = %+v, %v", st, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// Lost closes when the lease is released from elsewhere (another Client
// value releasing as the holder).
func TestLostWhenReleasedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New(s.URL, client.WithHTTPClient(validated(t, nil)))
	if out, err := other.Release(ctx, "a", "L"); out.Outcome != lk.Released || err != nil {
		t.Fatalf("release from elsewhere = %+v, %v", out, err)
	}
	lostWithin(t, lease, 3*time.Second)
	if !errors.Is(lease.Err(), client.ErrNotHolder) {
		t.Errorf("Err = %v, want ErrNotHolder", lease.Err())
	}
}

// Lost closes when the server retires the lease at its expiry: here a
// manual clock jumps past it.
func TestLostWhenLapsed(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := engine.NewManualClock(time.Unix(1767225600, 0))
	s := newServer(t, clock)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if lease.ExpiresAt().Unix() != 1767225603 {
		t.Errorf("ExpiresAt %d, want the server clock's 1767225603", lease.ExpiresAt().Unix())
	}
	clock.Advance(3 * time.Second)
	lostWithin(t, lease, 3*time.Second)
	if !errors.Is(lease.Err(), client.ErrNotHolder) {
		t.Errorf("Err = %v, want ErrNotHolder", lease.Err())
	}
}

// Lost closes, as expired, when the server cannot be reached until the
// lease's expiry.
func TestLostWhenUnreachable(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	start := time.Now()
	lostWithin(t, lease, 4*time.Second)
	if !errors.Is(lease.Err(), client.ErrExpired) {
		t.Errorf("Err = %v, want ErrExpired", lease.Err())
	}
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("lost %v after the server went away; the lease had at most 2s", d)
	}
	if err := lease.Release(ctx); !errors.Is(err, client.ErrExpired) {
		t.Errorf("Release = %v, want ErrExpired", err)
	}
}

// TestUnavailableWithdraws: an acquire answered 503 (the server's database
// away) may have been queued or granted all the same, so Acquire sends a
// release for it, and returns ErrUnavailable.
func TestUnavailableWithdraws(t *testing.T) {
	t.Parallel()
	var released atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/acquire":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"unavailable","message":"the database is unreachable"}`))
		case "/v1/release":
			released.Store(true)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"outcome":"withdrawn"}`))
		}
	}))
	defer hs.Close()
	// The stand-in's answers are the API's: the validator checks them.
	c := client.New(hs.URL, client.WithHTTPClient(validated(t, nil)))
	_, err := c.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second, Wait: 5 * time.Second})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Acquire answered 503: %v, want ErrUnavailable", err)
	}
	if !released.Load() {
		t.Error("no release was sent for the acquire whose outcome is unknown")
	}
}

// A grant from the queue whose lease lapsed before its answer reached the
// client (a pause of the process, as in incident INC-5127, or of the
// server) is no lease: Acquire confirms a grant that took over a second with
// a renew, and returns a *GrantLostError when the renew is refused, instead
// of a Lease whose Lost stays open while a successor may hold the lock.
func TestWaitGrantLapsedBeforeAnswer(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	clock := engine.NewManualClock(time.Unix(1_700_000_000, 0))
	s := newServer(t, clock)
	a, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "a", TTL: 5 * time.Second})
	if err != nil || a.Outcome != lk.Granted {
		t.Fatalf("a's acquire: %+v, %v", a, err)
	}
	// The answer of b's waiting acquire is held back while the server's
	// clock runs past the lease it grants, as a paused job would find it.
	slow := client.New(s.URL, client.WithHTTPClient(validated(t, roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && r.URL.Path == "/v1/acquire" {
			time.Sleep(1100 * time.Millisecond)
			clock.Advance(10 * time.Second)
			testutil.Eventually(t, 5*time.Second, "b's lease lapsed", func() bool {
				st, err := s.Inspect(ctx, "L")
				return err == nil && len(st.Holders) == 0
			})
		}
		return resp, err
	}))))
	got := make(chan error, 1)
	go func() {
		l, err := slow.Acquire(ctx, "L", client.AcquireOptions{Client: "b", TTL: 5 * time.Second, Wait: 30 * time.Second})
		if l != nil {
			l.Release(ctx)
			err = fmt.Errorf("Acquire returned a lease (token %d, Err %v) that had lapsed before its answer", l.Token(), l.Err())
		}
		got <- err
	}()
	testutil.Eventually(t, 5*time.Second, "b queued on L", func() bool {
		st, err := s.Inspect(ctx, "L")
		return err == nil && len(st.Queue) == 1
	})
	if _, err := s.Release(ctx, "a", "L"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		var lost *client.GrantLostError
		if !errors.As(err, &lost) || lost.Token != 2 || !errors.Is(err, client.ErrNotHolder) {
			t.Errorf("Acquire = %v, want a *GrantLostError for token 2 matching ErrNotHolder", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b's Acquire not answered")
	}
}
