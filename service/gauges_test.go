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

// TestOldestWait: the gauge's figure is the wait of the client queued
// earliest in any queue, counted up to ts, read apart as in a transaction,
// on every backend; 0 when nobody waits.
func TestOldestWait(t *testing.T) {
	for _, b := range testutil.Backends {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			svc := b.Open(t)
			acq := func(ts int64, client, lock string) {
				t.Helper()
				if _, err := svc.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: 1000, Mode: lk.Exclusive}); err != nil {
					t.Fatal(err)
				}
			}
			check := func(ts, want int64) {
				t.Helper()
				got, err := engine.Do(svc, ctx, ts, struct{}{}, readGauges)
				if err != nil || got.OldestWait != want {
					t.Errorf("oldest wait at %d: %d, %v; want %d", ts, got.OldestWait, err, want)
				}
				got, err = engine.Apart(svc, ctx, ts, struct{}{}, readGauges)
				if b.Name == "sqlite-memory" {
					if err != service.ErrNeedsTx {
						t.Errorf("oldest wait apart on a private in-memory database: %d, %v; want ErrNeedsTx", got.OldestWait, err)
					}
				} else if err != nil || got.OldestWait != want {
					t.Errorf("oldest wait apart at %d: %d, %v; want %d", ts, got.OldestWait, err, want)
				}
			}
			check(100, 0)
			acq(100, "a", "L1")
			acq(100, "x", "L2")
			check(100, 0) // holders do not wait
			acq(110, "b", "L2")
			acq(130, "c", "L1") // the head of L1's queue, later than L2's
			acq(140, "d", "L2")
			check(150, 40)
			// b leaves L2's queue: the oldest is now c, at 130.
			if _, err := svc.Release(ctx, 160, lk.ReleaseRequest{Client: "b", Lock: "L2"}); err != nil {
				t.Fatal(err)
			}
			check(170, 40)
			// c is granted L1: d, queued at 140, is left.
			if _, err := svc.Release(ctx, 180, lk.ReleaseRequest{Client: "a", Lock: "L1"}); err != nil {
				t.Fatal(err)
			}
			check(200, 60)
		})
	}
}

// readGauges is service.ReadGauges as an engine.Do can run it.
func readGauges(op *service.Op, _ struct{}) (service.Gauges, error) { return service.ReadGauges(op) }

// oldestWait is service.OldestWait as an engine.Do can run it.
func oldestWait(op *service.Op, _ struct{}) (int64, error) { return service.OldestWait(op) }

// TestOldestWaitCost: the gauge reads the same pages whether ten clients
// wait or ten thousand, in one queue or in ten thousand (an index lookup,
// not a pass over the queues).
func TestOldestWaitCost(t *testing.T) {
	pages := func(locks, perLock int) int64 {
		ctx := context.Background()
		svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
		ts := int64(0)
		for l := range locks {
			lock := fmt.Sprintf("lock-%05d", l)
			if _, err := svc.Acquire(ctx, ts, lk.AcquireRequest{Client: "holder-" + lock, Lock: lock, TTL: 86400, Mode: lk.Exclusive}); err != nil {
				t.Fatal(err)
			}
			for w := range perLock {
				req := lk.AcquireRequest{Client: fmt.Sprintf("w-%s-%05d", lock, w), Lock: lock, TTL: 10, Mode: lk.Exclusive}
				ts = min(ts+1, 10000)
				if _, err := svc.Acquire(ctx, ts, req); err != nil {
					t.Fatal(err)
				}
			}
		}
		before, err := svc.PagesRead()
		if err != nil {
			t.Fatal(err)
		}
		if wait, err := engine.Do(svc, ctx, 50000, struct{}{}, oldestWait); err != nil || wait != 49999 {
			t.Fatalf("OldestWait: %d, %v; want 49999", wait, err)
		}
		after, err := svc.PagesRead()
		if err != nil {
			t.Fatal(err)
		}
		return after - before
	}
	few, oneQueue, manyQueues := pages(1, 10), pages(1, 10000), pages(10000, 1)
	t.Logf("pages read: %d with 10 waiters, %d with 10,000 in one queue, %d with 10,000 in 10,000 queues", few, oneQueue, manyQueues)
	if oneQueue > few+8 || manyQueues > few+8 {
		t.Errorf("OldestWait reads more pages as more clients wait: %d, %d, %d", few, oneQueue, manyQueues)
	}
}
