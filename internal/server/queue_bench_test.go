package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// queueOf makes, in a fresh database file, lock "L" held exclusively (with
// one ended lease before, so that queued answers carry an estimate, as
// serve's do) and `waiters` shared waiters behind it, then serves it over
// HTTP on loopback, with the rules serve runs.
func queueOf(tb testing.TB, waiters int) *testutil.Server {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "leasekeeper.db")
	// Filled without explanations: the fill itself is not measured.
	d := testutil.OpenDirect(tb, path, service.Config{})
	ctx := context.Background()
	now := time.Now().Unix()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	_, err := d.Acquire(ctx, now-100, lk.AcquireRequest{Client: "before", Lock: "L", TTL: 3600, Mode: lk.Exclusive})
	must(err)
	_, err = d.Release(ctx, now-90, lk.ReleaseRequest{Client: "before", Lock: "L"})
	must(err)
	_, err = d.Acquire(ctx, now-90, lk.AcquireRequest{Client: "holder", Lock: "L", TTL: 3600, Mode: lk.Exclusive})
	must(err)
	must(d.Group(ctx, func() {
		for i := range waiters {
			if _, err := d.Acquire(ctx, now-90, lk.AcquireRequest{Client: fmt.Sprintf("w%06d", i), Lock: "L", TTL: 60, Mode: lk.Shared}); err != nil {
				tb.Error(err)
				return
			}
		}
	}))
	must(d.Close())
	return testutil.StartServer(tb, path, engine.Options{Rules: service.Config{Explain: true}}, server.Options{})
}

func call(tb testing.TB, hc *http.Client, method, url string, body any, out any) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		tb.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkEnqueueBehind measures, over HTTP, a shared acquire by a client
// that nobody waits for, queued behind 100 or 20,000 waiters, with the
// status call exec polls its wait with; the client then withdraws (not
// timed), so every round queues behind the same number. Issue 20 wants the
// two within 1.5x of each other.
func BenchmarkEnqueueBehind(b *testing.B) {
	for _, n := range []int{100, 1000, 5000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := queueOf(b, n)
			hc := &http.Client{}
			i := 0
			for b.Loop() {
				i++
				c := fmt.Sprintf("new%d", i)
				var res lk.AcquireResult
				call(b, hc, "POST", s.URL+"/v1/acquire", lk.AcquireRequest{Client: c, Lock: "L", TTL: 60, Mode: lk.Shared}, &res)
				if res.Outcome != lk.Queued || res.Position != int64(n+1) {
					b.Fatalf("acquire: %+v, want queued at %d", res, n+1)
				}
				var st lk.StatusResult
				call(b, hc, "GET", s.URL+"/v1/status?client="+c, nil, &st)
				if st.Waiting == nil || st.Waiting.Position != int64(n+1) {
					b.Fatalf("status: %+v", st)
				}
				b.StopTimer()
				call(b, hc, "POST", s.URL+"/v1/release", lk.ReleaseRequest{Client: c, Lock: "L"}, nil)
				b.StartTimer()
			}
		})
	}
}

// TestEnqueueCostFlat: an enqueue with exec's status poll costs about the
// same behind 20,000 waiters as behind 100 (issue 20). The estimate read
// every entry ahead and the rank counted them: 40 times the cost then. The
// bound here is looser than the benchmark's 1.5x, for a loaded machine.
func TestEnqueueCostFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a queue of 20,000")
	}
	small, large := queueOf(t, 100), queueOf(t, 20000)
	hc := &http.Client{}
	round := func(s *testutil.Server, n, i int) time.Duration {
		c := fmt.Sprintf("new%d", i)
		start := time.Now()
		var res lk.AcquireResult
		call(t, hc, "POST", s.URL+"/v1/acquire", lk.AcquireRequest{Client: c, Lock: "L", TTL: 60, Mode: lk.Shared}, &res)
		var st lk.StatusResult
		call(t, hc, "GET", s.URL+"/v1/status?client="+c, nil, &st)
		took := time.Since(start)
		if res.Position != int64(n+1) || st.Waiting == nil || st.Waiting.Position != int64(n+1) {
			t.Fatalf("behind %d: acquire %+v, status %+v", n, res, st)
		}
		call(t, hc, "POST", s.URL+"/v1/release", lk.ReleaseRequest{Client: c, Lock: "L"}, nil)
		return took
	}
	var a, b []time.Duration
	for i := range 41 {
		a = append(a, round(small, 100, i))
		b = append(b, round(large, 20000, i))
	}
	slices.Sort(a)
	slices.Sort(b)
	ma, mb := a[len(a)/2], b[len(b)/2]
	t.Logf("median enqueue+status: behind 100 %v, behind 20,000 %v", ma, mb)
	if mb > 3*ma {
		t.Errorf("behind 20,000 an enqueue costs %v, behind 100 %v: more than 3x", mb, ma)
	}
}

// TestPagesBoundHolders: with 20,000 shared holders on one lock, and 250
// waiters behind a writer, a locks page shows each lock's first holders
// and counts the rest, and inspect answers a page of them, the rest
// reached through next, every holder and waiter once, in order, with its
// rank. Both answered all 20,000 at once before (about 1.5 MB and 1 MB).
func TestPagesBoundHolders(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 holders")
	}
	path := filepath.Join(t.TempDir(), "leasekeeper.db")
	d := testutil.OpenDirect(t, path, service.Config{})
	ctx := context.Background()
	now := time.Now().Unix()
	const holders, waiters = 20000, 250
	if err := d.Group(ctx, func() {
		for i := range holders {
			if _, err := d.Acquire(ctx, now, lk.AcquireRequest{Client: fmt.Sprintf("r%06d", i), Lock: "L", TTL: 3600, Mode: lk.Shared}); err != nil {
				t.Error(err)
				return
			}
		}
		for i := range waiters {
			mode := lk.Shared
			if i == 0 {
				mode = lk.Exclusive
			}
			if _, err := d.Acquire(ctx, now, lk.AcquireRequest{Client: fmt.Sprintf("w%06d", i), Lock: "L", TTL: 60, Mode: mode}); err != nil {
				t.Error(err)
				return
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	s := testutil.StartServer(t, path, engine.Options{Rules: service.Config{Explain: true}}, server.Options{})
	get := func(path string, out any) int {
		t.Helper()
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	var locks lk.LocksResult
	start := time.Now()
	n := get("/v1/locks?limit=100", &locks)
	t.Logf("/v1/locks?limit=100: %d bytes in %v", n, time.Since(start))
	// Each lock's own columns were computed once per holder: a minute.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("/v1/locks?limit=100 took %v", took)
	}
	if len(locks.Locks) != 1 || len(locks.Locks[0].Holders) != lk.LockHoldersShown || locks.Locks[0].HolderCount != holders || n > 4096 {
		t.Errorf("locks page: %d bytes, %d holders shown of %d", n, len(locks.Locks[0].Holders), locks.Locks[0].HolderCount)
	}
	var in lk.InspectResult
	n = get("/v1/inspect?lock=L", &in)
	t.Logf("/v1/inspect: %d bytes", n)
	if len(in.Holders) != lk.DefaultLocksLimit || in.HolderCount == nil || *in.HolderCount != holders ||
		in.QueueLength == nil || *in.QueueLength != waiters || in.Next == nil || n > 16384 {
		t.Fatalf("inspect: %d bytes, %d holders, counts %v %v, next %v", n, len(in.Holders), in.HolderCount, in.QueueLength, in.Next)
	}
	var lastToken, rank int64
	seen := 0
	for after := ""; ; {
		var page lk.InspectResult
		get("/v1/inspect?lock=L&limit=999&after="+after, &page)
		for _, h := range page.Holders {
			if h.Token <= lastToken {
				t.Fatalf("holder token %d after %d", h.Token, lastToken)
			}
			lastToken = h.Token
			seen++
		}
		for _, w := range page.Queue {
			rank++
			if w.Position != rank || w.Client != fmt.Sprintf("w%06d", rank-1) {
				t.Fatalf("waiter %+v, want rank %d", w, rank)
			}
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	if seen != holders || rank != waiters {
		t.Errorf("paged %d holders and %d waiters, want %d and %d", seen, rank, holders, waiters)
	}
	for _, bad := range []string{"x", "h:", "q:-1", "q:01", "z:5", "h:1e3"} {
		resp, err := http.Get(s.URL + "/v1/inspect?lock=L&after=" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("after=%s: %d, want 400", bad, resp.StatusCode)
		}
	}
}
