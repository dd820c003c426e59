package engine

import (
	"context"
	"fmt"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
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

// TestAcquireAhead: on PostgreSQL, an acquire that opens a group has its
// state read sent ahead with BEGIN and the service row's lock, a round trip
// fewer (two, not three, for an exclusive grant); and the rows sent ahead
// are never taken once the transaction ran anything before the acquire's
// read: here a lapse that the acquire's own operation retires first,
// which frees the lock that the rows read ahead still show held.
func TestAcquireAhead(t *testing.T) {
	ctx := context.Background()
	r := openTestRunner(t, pgtest.DSN(t))
	r.cfg.Explain = true
	r.numbered = true
	// acquire runs q alone in a group, with its read ahead or not, and
	// returns its result and round trips.
	acquire := func(ts int64, q lk.AcquireRequest, ahead bool) (lk.AcquireResult, int64) {
		t.Helper()
		var res lk.AcquireResult
		var err error
		var w repo.Warm
		if ahead {
			w = service.AcquireAhead(&r.cfg, q)
		}
		before := r.db.RoundTrips()
		gerr := r.groupRunAhead(ctx, w, func() {
			res, err = exec(r, ctx, ts, q, service.Acquire)
		})
		if err != nil || gerr != nil {
			t.Fatalf("acquire %+v: %v %v", q, err, gerr)
		}
		return res, r.db.RoundTrips() - before
	}
	for i, mode := range []lk.Mode{lk.Exclusive, lk.Shared} {
		l, ts := "L-"+string(mode), int64(100+100*i)
		// The first two prepare every statement of the path on the
		// connection; the next two are measured.
		var trips [4]int64
		for j, c := range []string{"a", "a2", "b", "b2"} {
			var res lk.AcquireResult
			res, trips[j] = acquire(ts, lk.AcquireRequest{Client: c, Lock: l, TTL: 5, Mode: mode}, j%2 == 0)
			if res.Outcome != lk.Granted || res.Token != int64(j+1) {
				t.Fatalf("%s: %s's acquire: %s token %d, want granted %d", mode, c, res.Outcome, res.Token, j+1)
			}
			// The predecessors come with the state read ahead, for an
			// exclusive grant: the rows kept, scanned.
			if j > 0 {
				prev := []string{"a", "a2", "b"}[j-1]
				if p := res.Predecessors; len(p) != 1 || p[0].Token != int64(j) || p[0].Client == nil ||
					*p[0].Client != prev || p[0].Ended != lk.EndReleased || p[0].EndedAt != ts {
					t.Errorf("%s: %s's predecessors: %+v, want %s's token %d released at %d", mode, c, p, prev, j, ts)
				}
			}
			if j < 3 {
				if _, err := exec(r, ctx, ts, lk.ReleaseRequest{Client: c, Lock: l}, service.Release); err != nil {
					t.Fatal(err)
				}
			}
		}
		if trips[2] != trips[3]-1 || (mode == lk.Exclusive && trips[2] != 2) {
			t.Errorf("%s: an acquire alone in its group: %d round trips with its read ahead, %d without", mode, trips[2], trips[3])
		}
		// b2's lease (until ts+5) lapses in the operation of c's acquire,
		// at ts+10, before its read: the rows read ahead still show b2.
		if res, _ := acquire(ts+10, lk.AcquireRequest{Client: "c", Lock: l, TTL: 5, Mode: lk.Exclusive}, true); res.Outcome != lk.Granted || res.Token != 5 {
			t.Errorf("%s: an acquire after a lapse in its own operation: %s token %d, want granted 5", mode, res.Outcome, res.Token)
		}
	}
}
