package repo_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/sqlitetest"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestEndsCacheMatchesReads: under random operations (exclusive and
// shared acquires, releases, renews, short leases that lapse and are
// handed over late, deadlocks, a history that keeps 3 tokens a lock,
// groups of operations), every exclusive grant's predecessors that the
// SQLite writer names from what it kept (repo/ends.go) are the rows the
// read returns, and it names them for most grants; so are the hold times
// of every estimated wait it answers from what it kept.
func TestEndsCacheMatchesReads(t *testing.T) {
	var asked, wrong int
	restore := repo.VerifyEnds(func(lock string, token int64, kept, read []lk.Predecessor) {
		asked++
		if !samePredecessors(kept, read) {
			wrong++
			if wrong <= 5 {
				t.Errorf("%s token %d: kept %s, read %s", lock, token, showPredecessors(kept), showPredecessors(read))
			}
		}
	})
	defer restore()
	holds := verifyHolds(t)
	grants := 0
	for seed := range uint64(8) {
		grants += endsWorkload(t, seed, 3)
	}
	// A history long enough that the kept hold times fill up, and ends
	// are placed among twenty, ties on the instant among them.
	for seed := range uint64(4) {
		grants += endsWorkload(t, 100+seed, 1000)
	}
	if wrong > 0 {
		t.Fatalf("%d of %d answers differ from the read", wrong, asked)
	}
	if *holds < 100 {
		t.Fatalf("the kept hold times answered %d times; want them used", *holds)
	}
	t.Logf("%d estimates' hold times answered from the kept ends, all as read", *holds)
	// Most exclusive grants follow one issued in turn: the lapses forget
	// everything, and a lock's first grant is read.
	if asked < grants/4 {
		t.Fatalf("the kept ends answered %d times in %d grants; want them used", asked, grants)
	}
	t.Logf("%d grants, %d answered from the kept ends, all as read", grants, asked)
}

// endsWorkload runs random operations on a new SQLite file that keeps
// keep tokens of each lock's history, and returns how many grants they
// made.
func endsWorkload(t *testing.T, seed uint64, keep int64) int {
	t.Helper()
	ctx := context.Background()
	d, _ := openKept(t, service.Config{Explain: true, History: service.HistoryRetention{Keep: keep}})
	grants := 0
	d.OnCommit(func(es []service.Event) {
		for _, e := range es {
			if e.Kind == lk.EventGrant {
				grants++
			}
		}
	})
	rng := rand.New(rand.NewPCG(seed, 7))
	clients := []string{"a", "b", "c", "d", "e", "f"}
	locks := []string{"L", "M", "N"}
	ts := int64(1)
	// Mostly leases that outlive the run's pace, some that lapse.
	ttl := func() int64 {
		if rng.IntN(8) == 0 {
			return 1 + rng.Int64N(3)
		}
		return 20 + rng.Int64N(40)
	}
	op := func() {
		client, lock := clients[rng.IntN(len(clients))], locks[rng.IntN(len(locks))]
		switch k := rng.IntN(10); {
		case k < 5:
			mode := lk.Exclusive
			if rng.IntN(4) == 0 {
				mode = lk.Shared
			}
			d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: ttl(), Mode: mode})
		case k < 9:
			d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: lock})
		case rng.IntN(2) == 0:
			d.Renew(ctx, ts, lk.RenewRequest{Client: client, Lock: lock, TTL: ttl()})
		default: // its queue's estimates, through GrantHoldTimes
			d.Inspect(ctx, ts, lk.InspectRequest{Lock: lock})
		}
		if rng.IntN(4) == 0 {
			ts++
		}
	}
	for range 1500 {
		if rng.IntN(5) == 0 {
			if err := d.Group(ctx, func() {
				for range 1 + rng.IntN(6) {
					op()
				}
			}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		op()
	}
	return grants
}

// TestEndsCacheForgetsRollback: what a group that failed recorded is
// forgotten with it. Here a group releases x's lease and then fails, so
// that x still holds the lock; the end that did not happen must not be
// named among the predecessors of the grant that x's real release then
// hands over.
func TestEndsCacheForgetsRollback(t *testing.T) {
	asked := verifyKept(t)
	ctx := context.Background()
	d, path := openKept(t, service.Config{Explain: true})
	rename := func(stmt string) {
		t.Helper()
		if err := sqlitetest.Exec(ctx, path, stmt); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(ts int64, client string, want lk.Outcome) {
		t.Helper()
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 100, Mode: lk.Exclusive})
		if err != nil || r.Outcome != want {
			t.Fatalf("acquire by %s: %+v, %v; want %s", client, r, err, want)
		}
	}
	acquire(1, "x", lk.Granted)
	rename(`ALTER TABLE store_values RENAME TO store_values_away`)
	err := d.Group(ctx, func() {
		if _, err := d.Release(ctx, 2, lk.ReleaseRequest{Client: "x", Lock: "L"}); err != nil {
			t.Errorf("release in the group: %v", err)
		}
		d.Write(ctx, 2, lk.WriteRequest{Lock: "L", Key: "k", Value: "v", Token: 1})
	})
	if err == nil {
		t.Fatal("the group with the failed write committed")
	}
	rename(`ALTER TABLE store_values_away RENAME TO store_values`)
	acquire(3, "y", lk.Queued)
	if _, err := d.Release(ctx, 4, lk.ReleaseRequest{Client: "x", Lock: "L"}); err != nil {
		t.Fatal(err)
	}
	acquire(5, "x", lk.Queued)
	if _, err := d.Release(ctx, 6, lk.ReleaseRequest{Client: "y", Lock: "L"}); err != nil {
		t.Fatal(err)
	}
	if *asked == 0 {
		t.Error("the kept ends never answered")
	}
}

// TestEndsCacheFullLists: a crowd of 150 readers ends before a writer is
// handed the lock, more than the 100 kept ends of a token; the writer's
// grant prunes some of them (a history of 99 to 1,000 tokens), in an order
// of ends with ties. Later, rows past their day are pruned by age. Every
// answer from the kept ends is the read's.
func TestEndsCacheFullLists(t *testing.T) {
	for _, keep := range []int64{99, 100, 101, 1000} {
		t.Run(fmt.Sprint(keep), func(t *testing.T) {
			asked := verifyKept(t)
			ctx := context.Background()
			d, _ := openKept(t, service.Config{Explain: true, History: service.HistoryRetention{Keep: keep, Days: 1}})
			acquire := func(ts int64, client string, mode lk.Mode) {
				t.Helper()
				if _, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 1000, Mode: mode}); err != nil {
					t.Fatal(err)
				}
			}
			release := func(ts int64, client string) {
				t.Helper()
				if _, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: "L"}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 150 {
				acquire(1, fmt.Sprintf("r%03d", i), lk.Shared)
			}
			acquire(2, "w", lk.Exclusive) // queued behind the crowd
			// Ends in threes at each instant, the later tokens of each
			// three first, so that ties on ended_at order by token.
			for i := range 150 {
				j := i/3*3 + 2 - i%3
				release(3+int64(i/3), fmt.Sprintf("r%03d", j))
			}
			// The lock passes from client to client, handed over (the next
			// one waits first) and granted on the spot in turn, before and
			// after every end so far is past its day.
			holder, ts := "w", int64(100)
			pass := func(i int) {
				next := fmt.Sprintf("x%d", i%2)
				if i%2 == 0 {
					acquire(ts, next, lk.Exclusive)
					release(ts, holder)
				} else {
					release(ts, holder)
					acquire(ts, next, lk.Exclusive)
				}
				holder = next
				ts++
			}
			for i := range 20 {
				pass(i)
			}
			ts += 2 * 86400 // the holder's lease lapsed too
			holder = "w"
			acquire(ts, holder, lk.Exclusive)
			for i := range 20 {
				pass(i)
			}
			if *asked < 20 {
				t.Errorf("the kept ends answered %d times; want them used", *asked)
			}
		})
	}
}

// TestEndsCacheForgetsAgePruning: ends recorded under a token that stays
// the lock's last for days (a reader renews its lease while the others'
// ends grow old) are pruned by age before the next grant names them.
func TestEndsCacheForgetsAgePruning(t *testing.T) {
	verifyKept(t)
	ctx := context.Background()
	d, _ := openKept(t, service.Config{Explain: true, History: service.HistoryRetention{Days: 1}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"a", "b", "c"} {
		_, err := d.Acquire(ctx, 1, lk.AcquireRequest{Client: c, Lock: "L", TTL: 86400, Mode: lk.Shared})
		must(err)
	}
	for _, c := range []string{"a", "b"} {
		_, err := d.Release(ctx, 2, lk.ReleaseRequest{Client: c, Lock: "L"})
		must(err)
	}
	for _, ts := range []int64{80000, 160000} {
		_, err := d.Renew(ctx, ts, lk.RenewRequest{Client: "c", Lock: "L", TTL: 86400})
		must(err)
	}
	_, err := d.Acquire(ctx, 2*86400+10, lk.AcquireRequest{Client: "z", Lock: "M", TTL: 10, Mode: lk.Exclusive}) // prunes a's and b's ends
	must(err)
	_, err = d.Release(ctx, 2*86400+11, lk.ReleaseRequest{Client: "c", Lock: "L"})
	must(err)
	r, err := d.Acquire(ctx, 2*86400+12, lk.AcquireRequest{Client: "w", Lock: "L", TTL: 10, Mode: lk.Exclusive})
	must(err)
	if len(r.Predecessors) != 1 || *r.Predecessors[0].Client != "c" {
		t.Errorf("w's predecessors %s, want c's end alone", showPredecessors(r.Predecessors))
	}
}

// verifyKept has every answer of the kept ends compared with the read
// until t ends, and returns how many there were.
func verifyKept(t *testing.T) *int {
	verifyHolds(t)
	asked := new(int)
	t.Cleanup(repo.VerifyEnds(func(lock string, token int64, kept, read []lk.Predecessor) {
		*asked++
		if !samePredecessors(kept, read) {
			t.Errorf("%s token %d: kept %s, read %s", lock, token, showPredecessors(kept), showPredecessors(read))
		}
	}))
	return asked
}

// TestEndsCacheHoldTimes: acquires queue one after another, with no end
// between them, behind a lock with more ends than an estimate averages,
// so that every estimate after the first takes the hold times that the
// first one's read left; then an end, of a lease held for a different
// time, is placed among them.
func TestEndsCacheHoldTimes(t *testing.T) {
	asked := verifyHolds(t)
	acquire, release := onL(t, service.Config{Explain: true})
	ts := int64(1)
	for i := range 30 {
		acquire(ts, "a", lk.Exclusive, lk.Granted)
		ts += 1 + int64(i%4) // holds of 1 to 4 s
		release(ts, "a")
	}
	acquire(ts, "h", lk.Exclusive, lk.Granted)
	for i, mode := range []lk.Mode{lk.Exclusive, lk.Shared, lk.Shared, lk.Exclusive} {
		acquire(ts+1, fmt.Sprintf("w%d", i), mode, lk.Queued)
	}
	release(ts+10, "h") // a hold of 10 s, among those of 1 to 4 s
	acquire(ts+11, "x", lk.Exclusive, lk.Queued)
	// w0 hands over to the readers w1 and w2 together; they end at one
	// instant, the later token first, so that the other end is placed
	// second among twenty, by its token.
	release(ts+12, "w0")
	acquire(ts+13, "y", lk.Exclusive, lk.Queued)
	release(ts+14, "w2")
	release(ts+14, "w1")
	acquire(ts+15, "z", lk.Exclusive, lk.Queued)
	if *asked < 6 {
		t.Fatalf("the kept hold times answered %d of 6 estimates", *asked)
	}
}

// TestEndsCacheHoldTimesCrowd: 25 readers end at one instant, the later
// tokens first, behind a full list of kept hold times: each end is placed
// after those before it, the twentieth last among twenty, and the ones
// after it are left out.
func TestEndsCacheHoldTimesCrowd(t *testing.T) {
	asked := verifyHolds(t)
	acquire, release := onL(t, service.Config{Explain: true})
	for i := range int64(30) {
		acquire(2*i+1, "a", lk.Exclusive, lk.Granted)
		release(2*i+2, "a")
	}
	for i := range 25 {
		acquire(100+int64(i), fmt.Sprintf("r%02d", i), lk.Shared, lk.Granted)
	}
	acquire(200, "w", lk.Exclusive, lk.Queued) // reads the 20 exclusive ends
	for i := 24; i >= 0; i-- {
		release(300, fmt.Sprintf("r%02d", i))
	}
	acquire(301, "x", lk.Exclusive, lk.Queued) // the readers' last 20
	if *asked < 1 {
		t.Fatal("the kept hold times never answered")
	}
}

// onL opens a new SQLite file with rules and returns what acquires lock
// L on it (a ttl of 1,000 s, the outcome it must have) and what releases
// it.
func onL(t *testing.T, rules service.Config) (acquire func(ts int64, client string, mode lk.Mode, want lk.Outcome),
	release func(ts int64, client string)) {
	t.Helper()
	ctx := context.Background()
	d, _ := openKept(t, rules)
	acquire = func(ts int64, client string, mode lk.Mode, want lk.Outcome) {
		t.Helper()
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 1000, Mode: mode})
		if err != nil || r.Outcome != want {
			t.Fatalf("acquire by %s: %+v, %v; want %s", client, r, err, want)
		}
	}
	release = func(ts int64, client string) {
		t.Helper()
		if _, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: "L"}); err != nil {
			t.Fatal(err)
		}
	}
	return acquire, release
}

// verifyHolds has every hold time that the writer answers from what it
// kept compared with the read, until t ends, and counts the answers.
func verifyHolds(t *testing.T) *int {
	asked := new(int)
	t.Cleanup(repo.VerifyHolds(func(lock string, kept, read []repo.HoldEnd) {
		*asked++
		if !reflect.DeepEqual(kept, read) {
			t.Errorf("%s: kept hold times %s, read %s", lock, showHolds(kept), showHolds(read))
		}
	}))
	return asked
}

func showHolds(hs []repo.HoldEnd) string {
	s := "["
	for i, h := range hs {
		after, at, token := h.Key()
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%s/%d@%d,%d", token, h.Mode, h.Held, after, at)
	}
	return s + "]"
}

// openKept opens a new SQLite file with rules, closed when t ends.
func openKept(t *testing.T, rules service.Config) (*engine.Direct, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ends.db")
	d, err := engine.OpenDirect(context.Background(), path, repo.Options{}, rules)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, path
}

func samePredecessors(a, b []lk.Predecessor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Client == nil || y.Client == nil || *x.Client != *y.Client {
			return false
		}
		x.Client, y.Client = nil, nil
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func showPredecessors(ps []lk.Predecessor) string {
	s := "["
	for i, p := range ps {
		if i > 0 {
			s += " "
		}
		c := "?"
		if p.Client != nil {
			c = *p.Client
		}
		s += fmt.Sprintf("%d:%s/%s/%s@%d", p.Token, c, p.Mode, p.Ended, p.EndedAt)
	}
	return s + "]"
}
