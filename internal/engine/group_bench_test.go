package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// BenchmarkGroupedPairs: what the committer's turn costs per pair at 64
// clients, without HTTP: an acquire granted at once and its release, on
// 64 locks in turn (a client each, as lkload --clients 64 runs them), 11
// pairs to a group commit (the 22 operations a group held there), on a
// durable SQLite file (synchronous=FULL, as serve runs it) and with the
// history and the explanations that serve keeps. Besides the time per
// pair it reports the process's CPU per pair (cpu-µs/pair): the sync is
// a wait, not work, and the CPU is steadier to compare builds by on a
// shared machine (docs/performance.md).
func BenchmarkGroupedPairs(b *testing.B) {
	ctx := context.Background()
	d, err := engine.OpenDirect(ctx, filepath.Join(b.TempDir(), "bench.db"), repo.Options{Synchronous: "FULL"},
		service.Config{Explain: true})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	locks, clients := make([]string, 64), make([]string, 64)
	for i := range locks {
		locks[i], clients[i] = fmt.Sprintf("lk-%02d", i), fmt.Sprintf("c-%02d", i)
	}
	const pairsPerGroup = 11
	ts := int64(1)
	next := 0
	group := func() {
		err := d.Group(ctx, func() {
			for range pairsPerGroup {
				lock, client := locks[next%len(locks)], clients[next%len(locks)]
				next++
				r, err := d.Acquire(ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: 30, Mode: lk.Exclusive})
				if err != nil || r.Outcome != lk.Granted {
					b.Fatalf("acquire: %+v, %v", r, err)
				}
				if _, err := d.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: lock}); err != nil {
					b.Fatalf("release: %v", err)
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	// Every lock some way into its history, as a server that has run a while.
	for range 64 * 200 / pairsPerGroup {
		group()
	}
	start := cpuTime()
	groups := 0
	for b.Loop() {
		group()
		groups++
	}
	pairs := float64(groups * pairsPerGroup)
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/pairs, "cpu-µs/pair")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/pairs, "µs/pair")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
