package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestReleaseReadsQueueOnlyWithWaiters: on SQLite, the statement that
// deletes a released or revoked lease also reads how many wait for its
// lock, so that an end nobody waits behind reads no queue, and one with
// waiters hands the lock over. The count must stay exact through a
// withdrawal and a hand-over: the last release, with the queue emptied
// that way, reads no queue either.
func TestReleaseReadsQueueOnlyWithWaiters(t *testing.T) {
	ctx := context.Background()
	d := testutil.OpenDirect(t, repo.MemoryPath, service.Config{Explain: true})
	ts := int64(0)
	acquire := func(client string, want lk.Outcome) {
		t.Helper()
		ts++
		r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: "L", TTL: 30, Mode: lk.Exclusive})
		if err != nil || r.Outcome != want {
			t.Fatalf("acquire by %s: %+v, %v; want %s", client, r, err, want)
		}
	}
	// queueReads runs end, counting the statements that read queue_entries.
	queueReads := func(end func() error) int64 {
		t.Helper()
		d.CollectStats()
		ts++
		if err := end(); err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, s := range d.Stats() {
			if strings.Contains(s.Query, "FROM queue_entries") {
				n += s.Count
			}
		}
		return n
	}
	release := func(client string, want lk.Outcome) func() error {
		return func() error {
			r, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: "L"})
			if err == nil && r.Outcome != want {
				err = fmt.Errorf("release by %s: %+v, want %s", client, r, want)
			}
			return err
		}
	}
	holder := func(want string) {
		t.Helper()
		ts++
		st, err := d.Inspect(ctx, ts, lk.InspectRequest{Lock: "L"})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Holders) != 1 || st.Holders[0].Client != want {
			t.Errorf("holders %+v, want %s", st.Holders, want)
		}
	}

	acquire("a", lk.Granted)
	if n := queueReads(release("a", lk.Released)); n != 0 {
		t.Errorf("a release with nobody waiting read the queue %d times, want none", n)
	}
	acquire("a", lk.Granted)
	acquire("b", lk.Queued)
	if n := queueReads(release("a", lk.Released)); n == 0 {
		t.Error("a release with a waiter read no queue")
	}
	holder("b")
	acquire("c", lk.Queued)
	if n := queueReads(func() error {
		_, err := engine.Do(d, ctx, ts, lk.RevokeRequest{Client: "b", Lock: "L"}, service.Revoke)
		return err
	}); n == 0 {
		t.Error("a revoke with a waiter read no queue")
	}
	holder("c")
	acquire("d", lk.Queued)
	acquire("e", lk.Queued)
	queueReads(release("d", lk.Withdrawn))
	queueReads(release("c", lk.Released))
	holder("e")
	if n := queueReads(release("e", lk.Released)); n != 0 {
		t.Errorf("the last release, its queue emptied by a withdrawal and a hand-over, read the queue %d times, want none", n)
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
