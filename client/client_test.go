package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// testServer is a real server on loopback over a SQLite file of its own.
type testServer struct {
	*client.Client
	URL   string
	close func()
}

func newServer(t *testing.T, clock server.Clock) *testServer {
	t.Helper()
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(svc, server.Options{Clock: clock})
	hs := httptest.NewServer(srv.Handler())
	ts := &testServer{Client: client.New(hs.URL), URL: hs.URL}
	closed := false
	ts.close = func() {
		if !closed {
			closed = true
			srv.Close() // answers blocked acquires, so that hs.Close need not wait for them
			hs.Close()
			svc.Close()
		}
	}
	t.Cleanup(ts.close)
	return ts
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

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

	r, err := s.Renew(ctx, "etl-a", "exports/daily", 60*time.Second)
	if err != nil || r.Token != 1 || r.ExpiresAt.Before(before.Add(60*time.Second)) {
		t.Errorf("Renew = %+v, %v", r, err)
	}
	if err := lease.Write(ctx, "part-1", "rows 1-100"); err != nil {
		t.Errorf("Write: %v", err)
	}
	if err := s.Write(ctx, "exports/daily", "part-2", "rows 101-200", lease.Token()); err != nil {
		t.Errorf("Client.Write: %v", err)
	}
	if v, found, err := s.Read(ctx, "exports/daily", "part-1"); v != "rows 1-100" || !found || err != nil {
		t.Errorf("Read part-1 = %q, %v, %v", v, found, err)
	}
	if v, found, err := s.Read(ctx, "exports/daily", "part-9"); v != "" || found || err != nil {
		t.Errorf("Read part-9 = %q, %v, %v", v, found, err)
	}

	st, err := s.Inspect(ctx, "exports/daily")
	if err != nil || len(st.Holders) != 1 || len(st.Queue) != 0 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	if h := st.Holders[0]; h.Client != "etl-a" || h.Mode != lk.Exclusive || h.Token != 1 || !h.ExpiresAt.Equal(r.ExpiresAt) {
		t.Errorf("holder %+v, want etl-a exclusive 1 %v", h, r.ExpiresAt)
	}
	cs, err := s.Status(ctx, "etl-a")
	if err != nil || cs.Age != 1 || cs.Waiting != "" || len(cs.Holds) != 1 || cs.Holds[0].Lock != "exports/daily" || cs.Holds[0].Token != 1 {
		t.Errorf("Status = %+v, %v", cs, err)
	}
	if cs, err := s.Status(ctx, "nobody"); err != nil || cs.Age != 0 || len(cs.Holds) != 0 || cs.Waiting != "" {
		t.Errorf("Status(nobody) = %+v, %v", cs, err)
	}
	ls, err := s.Locks(ctx)
	if err != nil || len(ls) != 1 || ls[0].Lock != "exports/daily" || len(ls[0].Holders) != 1 || ls[0].Waiting != 0 {
		t.Errorf("Locks = %+v, %v", ls, err)
	}

	res, err := s.Do(ctx, client.ReadCall("exports/daily", "part-2"))
	if err != nil || res.Status != http.StatusOK || string(res.JSON) != `"rows 101-200"` || res.Err() != nil {
		t.Errorf("Do(read) = %+v, %v", res, err)
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
	if st, err := s.Inspect(ctx, "exports/daily"); err != nil || len(st.Holders) != 0 {
		t.Errorf("Inspect after Release = %+v, %v", st, err)
	}
	if ls, err := s.Locks(ctx); err != nil || len(ls) != 0 {
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
		if !errors.Is(err, want) || !errors.As(err, &e) || e.Status != status {
			t.Errorf("%s: %v, want %v with HTTP %d", name, err, want, status)
		}
	}
	_, err = s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	check("acquire again", err, client.ErrClientBusy, 409)
	check("acquire again (package leasekeeper's sentinel)", err, lk.ErrClientBusy, 409)
	_, err = s.Acquire(ctx, "M", client.AcquireOptions{Client: "a", TTL: 0})
	check("ttl 0", err, client.ErrInvalidTTL, 400)
	_, err = s.Acquire(ctx, "M", client.AcquireOptions{Client: "a", TTL: 1500 * time.Millisecond})
	check("ttl 1.5s", err, client.ErrInvalidArguments, 400)
	_, err = s.Acquire(ctx, strings.Repeat("x", 257), client.AcquireOptions{Client: "a", TTL: time.Second})
	check("long lock", err, client.ErrInvalidArguments, 400)
	if e := (*client.Error)(nil); errors.As(err, &e) && e.Detail != "lock is longer than 256 bytes" {
		t.Errorf("long lock: detail %q", e.Detail)
	}
	_, err = s.Renew(ctx, "b", "L", 30*time.Second)
	check("renew by a stranger", err, client.ErrNotHolder, 409)
	_, err = s.Release(ctx, "b", "L")
	check("release by a stranger", err, client.ErrNotHolder, 409)

	if err := s.Write(ctx, "L", "k", "v", 5); err != nil {
		t.Fatal(err)
	}
	check("stale write", s.Write(ctx, "L", "k", "v", 4), client.ErrStaleToken, 409)
	check("token 0", s.Write(ctx, "L", "k", "v", 0), client.ErrInvalidArguments, 400)

	res, err := s.Do(ctx, client.Call{Method: http.MethodGet, Path: "/v1/nothing"})
	if err != nil || res.Status != 404 || string(res.JSON) != `"error: not found"` {
		t.Errorf("Do(unknown path) = %+v, %v", res, err)
	}
	check("unknown path", res.Err(), client.ErrNotFound, 404)
	res, err = s.Do(ctx, client.Call{Method: http.MethodGet, Path: "/v1/acquire"})
	if err != nil {
		t.Fatal(err)
	}
	check("GET acquire", res.Err(), client.ErrMethodNotAllowed, 405)

	// Queued with no wait: Acquire withdraws, so b is not left queued.
	_, err = s.Acquire(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second})
	var q *client.QueuedError
	if !errors.Is(err, client.ErrQueued) || !errors.As(err, &q) || q.Position != 1 {
		t.Errorf("acquire of a held lock: %v, want ErrQueued at position 1", err)
	}
	if cs, err := s.Status(ctx, "b"); err != nil || cs.Waiting != "" {
		t.Errorf("b after a queued Acquire: %+v, %v; want not waiting", cs, err)
	}
	// The raw call leaves it queued, as the API does.
	res, err = s.Do(ctx, client.AcquireCall("L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second, Shared: true}))
	if err != nil || res.Status != 200 || string(res.JSON) != `["queued",1]` || !errors.Is(res.Err(), client.ErrQueued) {
		t.Errorf("Do(acquire) = %+v, %v", res, err)
	}
	if st, err := s.Inspect(ctx, "L"); err != nil || len(st.Queue) != 1 || st.Queue[0] != (client.Waiter{Client: "b", Mode: lk.Shared}) {
		t.Errorf("Inspect = %+v, %v", st, err)
	}
	if out, err := s.Release(ctx, "b", "L"); out != client.Withdrawn || err != nil {
		t.Errorf("Release of a waiter = %q, %v", out, err)
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
	counting := client.New(s.URL, client.WithHTTPClient(&http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.URL.Path == "/v1/renew" {
			renews.Add(1)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}))
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
		return err == nil && cs.Waiting == "L1"
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

// The keep-alive holds a 2-second lease through 6 seconds.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := newServer(t, nil)
	lease, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-lease.Lost():
		t.Fatalf("lost after %v: %v", time.Since(lease.ExpiresAt().Add(-2*time.Second)), lease.Err())
	case <-time.After(6 * time.Second):
	}
	st, err := s.Inspect(ctx, "L")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != 1 || !st.Holders[0].ExpiresAt.After(time.Now().Add(-time.Second)) {
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
	other := client.New(s.URL)
	if out, err := other.Release(ctx, "a", "L"); out != client.Released || err != nil {
		t.Fatalf("release from elsewhere = %q, %v", out, err)
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
	clock := server.NewManualClock(time.Unix(1767225600, 0))
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
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`"error: unavailable"`))
		case "/v1/release":
			released.Store(true)
			w.Write([]byte(`"withdrawn"`))
		}
	}))
	defer hs.Close()
	c := client.New(hs.URL)
	_, err := c.Acquire(ctxT(t), "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second, Wait: 5 * time.Second})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Acquire answered 503: %v, want ErrUnavailable", err)
	}
	if !released.Load() {
		t.Error("no release was sent for the acquire whose outcome is unknown")
	}
}
