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
// read returns, and it names them for most grants.
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
	grants := 0
	for seed := range uint64(8) {
		grants += endsWorkload(t, seed)
	}
	if wrong > 0 {
		t.Fatalf("%d of %d answers differ from the read", wrong, asked)
	}
	// Most exclusive grants follow one issued in turn: the lapses forget
	// everything, and a lock's first grant is read.
	if asked < grants/4 {
		t.Fatalf("the kept ends answered %d times in %d grants; want them used", asked, grants)
	}
	t.Logf("%d grants, %d answered from the kept ends, all as read", grants, asked)
}

// endsWorkload runs random operations on a new SQLite file and returns
// how many grants they made.
func endsWorkload(t *testing.T, seed uint64) int {
	t.Helper()
	ctx := context.Background()
	d, err := engine.OpenDirect(ctx, filepath.Join(t.TempDir(), "ends.db"), repo.Options{},
		service.Config{Explain: true, History: service.HistoryRetention{Keep: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
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
		default:
			d.Renew(ctx, ts, lk.RenewRequest{Client: client, Lock: lock, TTL: ttl()})
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
	var asked int
	restore := repo.VerifyEnds(func(lock string, token int64, kept, read []lk.Predecessor) {
		asked++
		if !samePredecessors(kept, read) {
			t.Errorf("%s token %d: kept %s, read %s", lock, token, showPredecessors(kept), showPredecessors(read))
		}
	})
	defer restore()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ends.db")
	d, err := engine.OpenDirect(ctx, path, repo.Options{}, service.Config{Explain: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rename := func(stmt string) { sqlitetest.Exec(t, path, stmt) }
	acquire := func(ts int64, client string, want lk.Outcome) {
		t.Helper()
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 100, Mode: lk.Exclusive})
		if err != nil || r.Outcome != want {
			t.Fatalf("acquire by %s: %+v, %v; want %s", client, r, err, want)
		}
	}
	acquire(1, "x", lk.Granted)
	rename(`ALTER TABLE store_values RENAME TO store_values_away`)
	err = d.Group(ctx, func() {
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
	if asked == 0 {
		t.Error("the kept ends never answered")
	}
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
