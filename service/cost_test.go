package service_test

import (
	"context"
	"fmt"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestCostIndependentOfHoldings: what an operation of a client costs does
// not grow with the number of other locks that client holds (issue 12, "Cost
// that grows with the wrong thing": one client taking 40,000 locks needed
// 114 s, because every acquire read all of its leases). The measure is the
// database pages each operation reads, which, unlike time, is the same on
// every run: each operation is run by a client holding 1,000 locks and by one
// holding 5,000, and the two must read the same pages, give or take a few
// for B-trees a level deeper. Scanning the 4,000 extra leases of the second
// client reads about twenty pages more (of its index by client).
func TestCostIndependentOfHoldings(t *testing.T) {
	small := opCosts(t, 1000)
	large := opCosts(t, 5000)
	for _, name := range costOps {
		s, l := small[name], large[name]
		t.Logf("%-26s %4d pages holding 1,000 locks, %4d holding 5,000", name, s, l)
		if l > s+8 {
			t.Errorf("%s read %d pages for a client holding 5,000 locks, %d for one holding 1,000: it reads the client's other leases", name, l, s)
		}
	}
}

var costOps = []string{
	"acquire, granted",
	"acquire, new lock",
	"acquire, queued",
	"acquire, queued, deadlock",
	"renew",
	"release, handed over",
	"release, withdrawn",
	"lapse, handed over",
	"write",
}

// opCosts has a client "big" take n locks and measures the pages each of
// costOps reads, all of them operations of big or on its leases.
func opCosts(t *testing.T, n int) map[string]int64 {
	ctx := context.Background()
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	acq := func(ts int64, client, lock string, ttl int64) lk.AcquireResult {
		t.Helper()
		r, err := svc.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: ttl, Mode: lk.Exclusive})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := range n {
		acq(0, "big", fmt.Sprintf("held-%05d", i), 86400)
	}
	// The locks the measured operations use, each already known, so that
	// no operation creates one except "acquire, new lock". The two that
	// big holds with somebody queued sort after its other locks: a scan
	// of big's leases for an awaited one would read all of them first.
	acq(0, "other", "free", 1)
	acq(0, "other", "busy", 86400)
	acq(0, "big", "z-handed", 86400)
	acq(0, "heir", "z-handed", 86400)
	acq(0, "big", "z-lapsing", 10)
	acq(0, "heir2", "z-lapsing", 86400)
	acq(0, "young", "cycle", 86400) // younger than big
	acq(1, "big", "renewed", 86400)

	costs := map[string]int64{}
	measure := func(name string, op func() error) {
		t.Helper()
		before, err := svc.PagesRead()
		if err != nil {
			t.Fatal(err)
		}
		if err := op(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after, err := svc.PagesRead()
		if err != nil {
			t.Fatal(err)
		}
		costs[name] = after - before
	}
	want := func(got, want lk.Outcome) error {
		if got != want {
			return fmt.Errorf("outcome %q, want %q", got, want)
		}
		return nil
	}
	ts := int64(2) // "free" lapsed at 1
	if err := svc.Advance(ctx, ts); err != nil {
		t.Fatal(err)
	}
	measure("acquire, granted", func() error { return want(acq(ts, "big", "free", 86400).Outcome, lk.Granted) })
	measure("acquire, new lock", func() error { return want(acq(ts, "big", "new", 86400).Outcome, lk.Granted) })
	measure("renew", func() error {
		_, err := svc.Renew(ctx, ts, lk.RenewRequest{Client: "big", Lock: "renewed", TTL: 86400})
		return err
	})
	measure("write", func() error {
		_, err := svc.Write(ctx, ts, lk.WriteRequest{Lock: "renewed", Key: "k", Value: "v", Token: 1})
		return err
	})
	measure("release, handed over", func() error {
		r, err := svc.Release(ctx, ts, lk.ReleaseRequest{Client: "big", Lock: "z-handed"})
		if err != nil {
			return err
		}
		return want(r.Outcome, lk.Released)
	})
	measure("acquire, queued", func() error { return want(acq(ts, "big", "busy", 86400).Outcome, lk.Queued) })
	measure("release, withdrawn", func() error {
		r, err := svc.Release(ctx, ts, lk.ReleaseRequest{Client: "big", Lock: "busy"})
		if err != nil {
			return err
		}
		return want(r.Outcome, lk.Withdrawn)
	})
	// young holds cycle and waits for held-00000, which big holds: big's
	// acquire of cycle closes a cycle, and young, the younger, is aborted.
	if r := acq(ts, "young", "held-00000", 86400); r.Outcome != lk.Queued {
		t.Fatalf("young's acquire: %+v", r)
	}
	measure("acquire, queued, deadlock", func() error {
		r := acq(ts, "big", "cycle", 86400)
		if r.Outcome != lk.Granted || len(r.Victims) != 1 || r.Victims[0] != "young" {
			return fmt.Errorf("%+v, want granted with young aborted", r)
		}
		return nil
	})
	measure("lapse, handed over", func() error { return svc.Advance(ctx, 10) }) // big's lease on z-lapsing ends
	return costs
}
