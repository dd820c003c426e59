package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

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
		err := r.groupRun(ctx, nil, func() {
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
		gerr := r.groupRun(ctx, []repo.Warm{w}, func() {
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

// TestQueueingRoundTrips: on PostgreSQL, an acquire that queues behind a
// holder, by a registered client and on a lock with a history (so that the
// deadlock check's shortcut and the estimate of its wait are both read),
// is three round trips alone in its group: BEGIN with its state, what the
// way into the queue reads, COMMIT. So is the release that hands the lock
// over to it: BEGIN with its lease, the queue's head with the
// predecessors of the grant, COMMIT.
func TestQueueingRoundTrips(t *testing.T) {
	ctx := context.Background()
	r := openTestRunner(t, pgtest.DSN(t))
	r.cfg.Explain = true
	r.numbered = true
	op := func(ts int64, q any) (any, int64) {
		t.Helper()
		var res any
		var err error
		var w repo.Warm
		switch q := q.(type) {
		case lk.AcquireRequest:
			w = service.AcquireAhead(&r.cfg, q)
		case lk.ReleaseRequest:
			w = service.ReleaseAhead(q)
		}
		before := r.db.RoundTrips()
		gerr := r.groupRun(ctx, []repo.Warm{w}, func() {
			switch q := q.(type) {
			case lk.AcquireRequest:
				res, err = exec(r, ctx, ts, q, service.Acquire)
			case lk.ReleaseRequest:
				res, err = exec(r, ctx, ts, q, service.Release)
			}
		})
		if err != nil || gerr != nil {
			t.Fatalf("%+v: %v %v", q, err, gerr)
		}
		return res, r.db.RoundTrips() - before
	}
	// A hold of 10 s; then, twice (the first prepares the statements), h
	// holds L and w, which holds M, queues for it.
	op(100, lk.AcquireRequest{Client: "h", Lock: "L", TTL: 60, Mode: lk.Exclusive})
	op(110, lk.ReleaseRequest{Client: "h", Lock: "L"})
	op(110, lk.AcquireRequest{Client: "w", Lock: "M", TTL: 600, Mode: lk.Exclusive})
	var trips, handOver int64
	for i := range 2 {
		ts := int64(120 + 20*i)
		op(ts, lk.AcquireRequest{Client: "h", Lock: "L", TTL: 60, Mode: lk.Exclusive})
		var res any
		res, trips = op(ts, lk.AcquireRequest{Client: "w", Lock: "L", TTL: 60, Mode: lk.Exclusive})
		// The holds so far: 10 s, then h's and w's of 10 s each in round 0.
		want := []float64{10, 10}[i]
		if a := res.(lk.AcquireResult); a.Outcome != lk.Queued || a.Position != 1 || a.EstimatedWait == nil || *a.EstimatedWait != want {
			t.Fatalf("round %d: w's acquire: %+v, want queued at 1 with an estimated wait of %v s", i, a, want)
		}
		res, handOver = op(ts+10, lk.ReleaseRequest{Client: "h", Lock: "L"})
		if rel := res.(lk.ReleaseResult); rel.Outcome != lk.Released {
			t.Fatalf("round %d: h's release: %s", i, rel.Outcome)
		}
		op(ts+20, lk.ReleaseRequest{Client: "w", Lock: "L"})
	}
	if trips != 3 {
		t.Errorf("an acquire that queues, alone in its group: %d round trips, want 3", trips)
	}
	if handOver != 3 {
		t.Errorf("a release that hands its lock over, alone in its group: %d round trips, want 3", handOver)
	}
}

// TestReadsAhead: on PostgreSQL, the reads that go ahead of their
// operations (repo/warm.go) save a round trip each when nothing changed
// their rows, and are dropped when something did: another operation's
// write to their lock or client, or a statement whose rows are not known
// (a lapse retired). Each group here sends its reads at BEGIN, past the
// committer's window, which would hold some of them back.
func TestReadsAhead(t *testing.T) {
	ctx := context.Background()
	r := openTestRunner(t, pgtest.DSN(t))
	r.cfg.Explain = true
	r.numbered = true
	c := &committer{r: r, clock: NewManualClock(time.Unix(1000, 0))}
	acq := func(client, lock string, ttl int64, res *lk.AcquireResult) *pending {
		q := lk.AcquireRequest{Client: client, Lock: lock, TTL: ttl, Mode: lk.Exclusive}
		return &pending{ahead: service.AcquireAhead(&r.cfg, q), exec: func(ctx context.Context, ts int64) (err error) {
			*res, err = exec(r, ctx, ts, q, service.Acquire)
			return err
		}}
	}
	rel := func(client, lock string, res *lk.ReleaseResult) *pending {
		q := lk.ReleaseRequest{Client: client, Lock: lock}
		return &pending{ahead: service.ReleaseAhead(q), exec: func(ctx context.Context, ts int64) (err error) {
			*res, err = exec(r, ctx, ts, q, service.Release)
			return err
		}}
	}
	// run runs group as the committer does, with every read sent at BEGIN
	// if all, else as the window lets them go, and returns its round trips.
	run := func(ts int64, all bool, group ...*pending) int64 {
		t.Helper()
		c.clock = NewManualClock(time.Unix(ts, 0))
		ahead := c.window(group, 0)
		if all {
			ahead = nil
			for _, p := range group {
				ahead = append(ahead, p.ahead)
			}
		}
		before := r.db.RoundTrips()
		if err := r.groupRun(ctx, ahead, func() { c.runAll(ctx, group) }); err != nil {
			t.Fatal(err)
		}
		for _, p := range group {
			if p.err != nil {
				t.Fatal(p.err)
			}
		}
		return r.db.RoundTrips() - before
	}

	// Each case below is a group whose reads all go at BEGIN, in which
	// one write alone drops the read ahead that it makes untrue: the
	// groups here register their clients and prune the history by age
	// (either would drop every read kept), hold L1b, L1t, L7, L8 and L10,
	// and queue w7 for L7 and c10 for L10.
	runAll := func(want lk.Outcome, acqs ...[2]string) {
		t.Helper()
		g := make([]*pending, len(acqs))
		res := make([]lk.AcquireResult, len(acqs))
		for i, a := range acqs {
			g[i] = acq(a[0], a[1], 30, &res[i])
		}
		run(1000, false, g...)
		for i, r := range res {
			if r.Outcome != want {
				t.Fatalf("setting up: %s acquires %s: %s, want %s", acqs[i][0], acqs[i][1], r.Outcome, want)
			}
		}
	}
	runAll(lk.Granted, [2]string{"a", "A"}, [2]string{"b", "B"}, [2]string{"s", "S"}, [2]string{"q", "Q"},
		[2]string{"p", "P"}, [2]string{"c8", "C8"}, [2]string{"e", "E"}, [2]string{"x7", "X7"},
		[2]string{"r", "L1b"}, [2]string{"t", "L1t"}, [2]string{"h7", "L7"}, [2]string{"h8", "L8"}, [2]string{"h10", "L10"})
	runAll(lk.Queued, [2]string{"w7", "L7"}, [2]string{"c10", "L10"})

	// A new lock's grant (LockGrant.new-lock) drops the rows that the
	// second acquire read ahead, which show no lock.
	var a, b lk.AcquireResult
	run(1000, true, acq("a", "L1", 30, &a), acq("b", "L1", 30, &b))
	if a.Outcome != lk.Granted || b.Outcome != lk.Queued {
		t.Errorf("two acquires of a new lock in a group: %s and %s, want granted and queued", a.Outcome, b.Outcome)
	}
	// A grant of a lock that exists (LockGrant.take-token): the same.
	var tr lk.ReleaseResult
	var ta, tb lk.AcquireResult
	run(1000, false, rel("t", "L1t", &tr))
	run(1000, true, acq("s", "L1t", 30, &ta), acq("q", "L1t", 30, &tb))
	if ta.Outcome != lk.Granted || tb.Outcome != lk.Queued {
		t.Errorf("two acquires of a free lock in a group: %s and %s, want granted and queued", ta.Outcome, tb.Outcome)
	}
	// A release (LeaseEnd.one) drops the rows that an acquire of its lock
	// read ahead, which show it held.
	var rr lk.ReleaseResult
	var ra lk.AcquireResult
	run(1000, true, rel("r", "L1b", &rr), acq("x7", "L1b", 30, &ra))
	if rr.Outcome != lk.Released || ra.Outcome != lk.Granted || ra.Token != 2 {
		t.Errorf("a release and an acquire of its lock in a group: %s and %s token %d, want released and granted 2", rr.Outcome, ra.Outcome, ra.Token)
	}
	// A grant to the client drops the rows its release read ahead, which
	// show no lease.
	var p lk.AcquireResult
	var pr lk.ReleaseResult
	run(1000, true, acq("p", "L4", 30, &p), rel("p", "L4", &pr))
	if p.Outcome != lk.Granted || pr.Outcome != lk.Released {
		t.Errorf("an acquire and a release of it in a group: %s and %s, want granted and released", p.Outcome, pr.Outcome)
	}
	// A waiter that withdraws (LockDequeue) drops the rows that another
	// acquire of its lock read ahead, which count it in the queue.
	var wr lk.ReleaseResult
	var wa lk.AcquireResult
	run(1000, true, rel("w7", "L7", &wr), acq("c8", "L7", 30, &wa))
	if wr.Outcome != lk.Withdrawn || wa.Outcome != lk.Queued || wa.Position != 1 {
		t.Errorf("a withdrawal and an acquire of its lock in a group: %s and %s at %d, want withdrawn and queued at 1", wr.Outcome, wa.Outcome, wa.Position)
	}
	// A waiter that withdraws (QueueTakeClient) drops the rows that its
	// acquire of another lock read ahead, which show it waiting.
	var cr lk.ReleaseResult
	var ca lk.AcquireResult
	run(1000, true, rel("c10", "L10", &cr), acq("c10", "L11", 30, &ca))
	if cr.Outcome != lk.Withdrawn || ca.Outcome != lk.Granted {
		t.Errorf("a withdrawal and an acquire by the same client in a group: %s and %s, want withdrawn and granted", cr.Outcome, ca.Outcome)
	}
	// A client queued (QueueAppend) drops the rows that its acquire of
	// another lock read ahead, which show it waiting for nothing.
	var qa, qb lk.AcquireResult
	var qbErr error
	second := acq("e", "L12", 30, &qb)
	answer := second.exec
	second.exec = func(ctx context.Context, ts int64) error { qbErr = answer(ctx, ts); return nil }
	run(1000, true, acq("e", "L8", 30, &qa), second)
	if qa.Outcome != lk.Queued || !errors.Is(qbErr, lk.ErrClientBusy) {
		t.Errorf("an acquire queued and the same client's acquire of another lock in a group: %s and %s %v, want queued and busy", qa.Outcome, qb.Outcome, qbErr)
	}
	// The first operation retires a lapsed lease of L2 before its own
	// read: the rows that the second read ahead still show it held.
	var h, x, y lk.AcquireResult
	run(1000, false, acq("h", "L2", 5, &h))
	run(1010, true, acq("x", "L3", 30, &x), acq("y", "L2", 30, &y))
	if h.Outcome != lk.Granted || y.Outcome != lk.Granted || y.Token != 2 {
		t.Errorf("an acquire of a lock whose lease lapsed earlier in its group: %s token %d, want granted 2", y.Outcome, y.Token)
	}
	// A release hands L5 over to its waiter, which the rows its acquire
	// of L6 read ahead still show waiting for L5.
	var h5, w5, w6 lk.AcquireResult
	var r5 lk.ReleaseResult
	run(1020, false, acq("h5", "L5", 30, &h5), acq("w5", "L5", 30, &w5))
	run(1020, true, rel("h5", "L5", &r5), acq("w5", "L6", 30, &w6))
	if w5.Outcome != lk.Queued || r5.Outcome != lk.Released || w6.Outcome != lk.Granted {
		t.Errorf("an acquire by a waiter handed its lock earlier in the group: %s, want granted", w6.Outcome)
	}

	// Through the window: groups of acquires, then of their releases, on
	// distinct locks, as 32 clients that each wait for their answer send
	// them. A group's reads go with its first round trip.
	const n = 32
	acqs, rels := make([]lk.AcquireResult, n), make([]lk.ReleaseResult, n)
	group := func(ts int64, release bool) int64 {
		g := make([]*pending, n)
		for i := range g {
			cl, l := fmt.Sprintf("w%d", i), fmt.Sprintf("W%d", i)
			if release {
				g[i] = rel(cl, l, &rels[i])
			} else {
				g[i] = acq(cl, l, 30, &acqs[i])
			}
		}
		return run(ts, false, g...)
	}
	group(1020, false) // the statements get prepared
	group(1020, true)
	var trips int64
	const rounds = 4
	for i := range rounds {
		trips += group(int64(1021+i), false)
		for j := range n {
			if acqs[j].Outcome != lk.Granted || acqs[j].Token != int64(i+2) {
				t.Fatalf("round %d: w%d: %s token %d, want granted %d", i, j, acqs[j].Outcome, acqs[j].Token, i+2)
			}
		}
		trips += group(int64(1021+i), true)
		for j := range n {
			if rels[j].Outcome != lk.Released {
				t.Fatalf("round %d: w%d's release: %s", i, j, rels[j].Outcome)
			}
		}
	}
	perOp := float64(trips) / float64(2*n*rounds)
	t.Logf("%.3f round trips per operation through the window (%d in %d groups of %d)", perOp, trips, 2*rounds, n)
	if perOp > 0.25 {
		t.Errorf("%.3f round trips per operation, want at most 0.25", perOp)
	}
}
