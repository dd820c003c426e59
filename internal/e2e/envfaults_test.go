package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// Helpers of the scenarios of the environment's faults (proxy, full disk,
// clock): what a server answered while a fault lasted.

// answers sums up the operations sent to one server in a window of the
// history: how each was answered, and the slowest answer.
type answers struct {
	counts map[string]int // "answered" (below 500), "503", "500", "no answer", "not sent"
	// slowest is the longest an operation that was not allowed to wait
	// (wait 0) took to be answered, or to give up.
	slowest time.Duration
	// changed counts the operations that changed something, acknowledged:
	// acquires, renews, releases and writes answered without an error.
	changed int
}

func (a answers) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(a.counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, a.counts[k]))
	}
	return fmt.Sprintf("%s; %d changes acknowledged; slowest without wait %v", strings.Join(parts, ", "), a.changed, a.slowest.Round(time.Millisecond))
}

// answersIn sums up the operations sent to server (all servers when -1)
// with their call in [from, to), history times.
func answersIn(ops []history.Op, server int, from, to int64) answers {
	a := answers{counts: map[string]int{}}
	for _, op := range ops {
		if (server >= 0 && op.Server != server) || op.Call < from || op.Call >= to {
			continue
		}
		o := op.Output
		switch {
		case o.NotSent:
			a.counts["not sent"]++
		case o.Unknown && o.Status == 0:
			a.counts["no answer"]++
		case o.Unknown, o.NotApplied:
			a.counts[fmt.Sprint(o.Status)]++
		default:
			a.counts["answered"]++
			if op.Input.Kind != history.Read && o.Err == "" {
				a.changed++
			}
		}
		if op.Input.Wait == 0 {
			a.slowest = max(a.slowest, time.Duration(op.Return-op.Call))
		}
	}
	return a
}

// faultAt returns the history time of the first fault of kind (a prefix,
// for "delay-db 200ms") noted for server, or fails t.
func faultAt(t *testing.T, h *history.History, kind string, server int) int64 {
	t.Helper()
	for _, f := range h.Faults() {
		if strings.HasPrefix(f.Kind, kind) && f.Server == server {
			return f.At
		}
	}
	t.Fatalf("no fault %q noted for server %d", kind, server)
	return 0
}

// awaitReady polls s's GET /v1/ready until it answers 200, for up to
// limit, and returns how long that took, or fails t.
func awaitReady(t *testing.T, s *cluster.Server, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ok := s.Ready(ctx)
		cancel()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("server %d not ready %v after the fault ended", s.Index(), limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sleepUntil sleeps until start+at.
func sleepUntil(start time.Time, at time.Duration) { time.Sleep(time.Until(start.Add(at))) }
