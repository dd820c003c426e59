package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestReleaseReadsQueueOnlyWithWaiters: on SQLite, the statement that
// deletes a released lease also reads how many wait for its lock, so that
// a release nobody waits behind reads no queue; one with a waiter reads it
// and hands the lock over.
func TestReleaseReadsQueueOnlyWithWaiters(t *testing.T) {
	ctx := context.Background()
	d := testutil.OpenDirect(t, repo.MemoryPath, service.Config{Explain: true})
	acquire := func(ts int64, client string) lk.AcquireResult {
		t.Helper()
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 30, Mode: lk.Exclusive})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// queueReads releases client's lease at ts and counts the statements
	// that read queue_entries.
	queueReads := func(ts int64, client string) int64 {
		t.Helper()
		d.CollectStats()
		if r, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: "L"}); err != nil || r.Outcome != lk.Released {
			t.Fatalf("release by %s: %+v, %v", client, r, err)
		}
		var n int64
		for _, s := range d.Stats() {
			if strings.Contains(s.Query, "FROM queue_entries") {
				n += s.Count
			}
		}
		return n
	}
	acquire(1, "a")
	if n := queueReads(2, "a"); n != 0 {
		t.Errorf("a release with nobody waiting read the queue %d times, want none", n)
	}
	acquire(3, "a")
	if r := acquire(4, "b"); r.Outcome != lk.Queued {
		t.Fatalf("b: %+v, want queued", r)
	}
	if n := queueReads(5, "a"); n == 0 {
		t.Error("a release with a waiter read no queue")
	}
	st, err := d.Inspect(ctx, 6, lk.InspectRequest{Lock: "L"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Client != "b" {
		t.Errorf("after the release: holders %+v, want b", st.Holders)
	}
}

// BenchmarkPair: an acquire granted at once and its release, on 64 locks
// in turn (a client each, as lkload --clients 64 runs them), each
// operation its own transaction, with the history and the explanations
// that serve keeps: the statements an operation runs in the committer's
// turn, without the group around them and without the disk (an in-memory
// database: what a file adds is its group's WAL frames and sync).
func BenchmarkPair(b *testing.B) {
	ctx := context.Background()
	d := testutil.OpenDirect(b, repo.MemoryPath, service.Config{Explain: true})
	locks, clients := make([]string, 64), make([]string, 64)
	for i := range locks {
		locks[i], clients[i] = fmt.Sprintf("lk-%02d", i), fmt.Sprintf("c-%02d", i)
	}
	ts := int64(1)
	pair := func(i int) {
		lock, client := locks[i%len(locks)], clients[i%len(locks)]
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: 30, Mode: lk.Exclusive})
		if err != nil || r.Outcome != lk.Granted {
			b.Fatalf("acquire: %+v, %v", r, err)
		}
		if _, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: lock}); err != nil {
			b.Fatalf("release: %v", err)
		}
	}
	// Every lock some way into its history, as a server that has run a while.
	for i := range 64 * 200 {
		pair(i)
	}
	i := 0
	for b.Loop() {
		pair(i)
		i++
	}
}
