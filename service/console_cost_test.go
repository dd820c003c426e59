package service_test

import (
	"context"
	"fmt"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestGraphCostBounded: GET /v1/graph's walk costs what it shows. Around a
// small component it reads the same database pages whether the database
// holds 500 or 5,000 other queues; around one lock with 1,000 or 5,000
// waiters, cut at lk.MaxGraphNodes nodes, the same pages too, but for
// B-trees a level deeper.
func TestGraphCostBounded(t *testing.T) {
	pages := func(n int) (small, large int64) {
		ctx := context.Background()
		svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
		acq := func(client, lock string) {
			t.Helper()
			if _, err := svc.Acquire(ctx, 0, lk.AcquireRequest{Client: client, Lock: lock, TTL: 86400, Mode: lk.Exclusive}); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			acq(fmt.Sprintf("h%05d", i), fmt.Sprintf("other-%05d", i))
			acq(fmt.Sprintf("w%05d", i), fmt.Sprintf("other-%05d", i))
			acq(fmt.Sprintf("q%05d", i), "crowded")
		}
		acq("a", "small")
		acq("b", "small")
		measure := func(req lk.GraphRequest) (int64, lk.GraphResult) {
			t.Helper()
			before, err := svc.PagesRead()
			if err != nil {
				t.Fatal(err)
			}
			g, err := engine.Do(svc, ctx, 0, req, service.Graph)
			if err != nil {
				t.Fatal(err)
			}
			after, err := svc.PagesRead()
			if err != nil {
				t.Fatal(err)
			}
			return after - before, g
		}
		small, g := measure(lk.GraphRequest{Lock: "small"})
		if len(g.Locks)+len(g.Clients) != 3 || g.Cut {
			t.Fatalf("graph around small: %+v", g)
		}
		large, g = measure(lk.GraphRequest{Lock: "crowded"})
		if !g.Cut || len(g.Locks)+len(g.Clients) != lk.MaxGraphNodes {
			t.Fatalf("graph around crowded: cut %v, %d nodes", g.Cut, len(g.Locks)+len(g.Clients))
		}
		return small, large
	}
	s1, l1 := pages(1000)
	s5, l5 := pages(5000)
	t.Logf("small component: %d pages among 1,000 other queues, %d among 5,000", s1, s5)
	t.Logf("cut component: %d pages with 1,000 waiters, %d with 5,000", l1, l5)
	if s5 > s1+8 {
		t.Errorf("the graph around a small component read %d pages among 5,000 other queues, %d among 1,000", s5, s1)
	}
	// Each of the walk's lookups may find its B-tree a level deeper with
	// 5,000 waiters: one page a lookup, a few lookups a node. Reading the
	// 4,000 waiters past the cut would cost several pages each.
	if l5 > l1+2*lk.MaxGraphNodes {
		t.Errorf("the cut graph read %d pages with 5,000 waiters, %d with 1,000: it reads past what it shows", l5, l1)
	}
}
