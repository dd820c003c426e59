package engine

import (
	"context"
	"fmt"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestRoundTripsPerOperation: on PostgreSQL, where an operation's time is
// its round trips to the database while every server waits for the service
// row's lock, a group commit of acquire and release pairs on distinct locks
// (the light load of docs/performance.md), with answers that say why (as
// serve has them), costs at most 1.5 round trips per operation, group
// overhead included, counted at the pgx layer where a batch is one.
func TestRoundTripsPerOperation(t *testing.T) {
	ctx := context.Background()
	r := openTestRunner(t, pgtest.DSN(t))
	r.cfg.Explain = true
	r.numbered = true
	const pairs, groups = 32, 5
	acquire := func(ts int64, c, l string) {
		t.Helper()
		res, err := exec(r, ctx, ts, lk.AcquireRequest{Client: c, Lock: l, TTL: 30, Mode: lk.Exclusive}, service.Acquire)
		if err != nil || res.Outcome != lk.Granted {
			t.Fatalf("acquire %s %s: %+v %v", c, l, res, err)
		}
	}
	release := func(ts int64, c, l string) {
		t.Helper()
		if _, err := exec(r, ctx, ts, lk.ReleaseRequest{Client: c, Lock: l}, service.Release); err != nil {
			t.Fatal(err)
		}
	}
	// Every client and lock once, so that the groups measured are the
	// steady state: clients registered, locks with a history.
	for i := range pairs {
		c, l := fmt.Sprintf("c%d", i), fmt.Sprintf("L%d", i)
		acquire(100, c, l)
		release(100, c, l)
	}
	before := r.db.RoundTrips()
	ops := 0
	for g := range groups {
		ts := int64(101 + g)
		err := r.groupRun(ctx, func() {
			for i := range pairs {
				c, l := fmt.Sprintf("c%d", i), fmt.Sprintf("L%d", i)
				acquire(ts, c, l)
				release(ts, c, l)
				ops += 2
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	perOp := float64(r.db.RoundTrips()-before) / float64(ops)
	t.Logf("%.2f round trips per operation (%d operations in %d groups)", perOp, ops, groups)
	if perOp > 1.5 {
		t.Errorf("%.2f round trips per operation, want at most 1.5", perOp)
	}
}
