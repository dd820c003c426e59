package e2e_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// The crash scenario under a heavy load: the figures of the first crash
// tests (TestCrashRecovery and TestCrashAuditTwoKills, once in cmd/leasekeeper),
// 32 workers on 20 locks of 4 keys each, and two kill -9s of the server at
// random moments, each followed by a start on the same SQLite file and the
// same audit log, while two pollers inspect the locks. Beyond the invariant
// checks and porcupine, every answer must match the API's document
// (APIChecker), what the polls showed (CheckPolls), the state the
// server shows at the end (CheckAfter) and its audit log, replayed
// (CheckAudit), must agree with the history.
var _ = register(scenario{
	name:    "crash-load",
	run:     runCrashLoad,
	catches: []string{failpoint.AcceptStaleWrite, failpoint.ReissueToken, failpoint.AnswerBeforeCommit},
})

func runCrashLoad(t *testing.T, failpoints []string) validate.Result {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	h := history.New()
	audit := filepath.Join(t.ArtifactDir(), "audit.jsonl")
	c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints, Args: []string{"--audit-log", audit}})
	// Every answer the workers get is checked against the API's document,
	// as the first crash test's were.
	api := validate.NewAPIChecker(t)
	w := traffic.Workload{Workers: 32, Locks: 20, Keys: 4, Duration: 4 * time.Second, Seed: seed, HTTP: api.Client()}
	// The first kill where the first crash test killed (1.0 to 1.8 s into
	// the load), the second 1.6 s later, with as much spread.
	var kills []time.Duration
	for i := range 2 {
		kills = append(kills, time.Second+time.Duration(i)*1600*time.Millisecond+time.Duration(rng.Int64N(int64(800*time.Millisecond))))
	}
	locks := make([]string, w.Locks)
	for i := range locks {
		locks[i] = traffic.LockName(i)
	}
	// Two pollers inspect the locks throughout, as in the first crash test.
	poller := validate.PollHolders(h, c.Target(0), locks, 2)
	traffic.Scenario{Workload: w, Kills: kills}.Run(t, c, h)
	polls := poller.Stop()
	logInFlight(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	more, answers := api.Violations()
	more = append(more, validate.CheckPolls(h, polls)...)
	t.Logf("%d answers checked against the API's document; %d inspect polls during the load, checked in %v", answers, len(polls), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	more = append(more, validate.CheckAfter(ctx, h, c.Target(0), locks)...)
	after := time.Since(start)
	start = time.Now()
	more = append(more, validate.CheckAudit(h, []string{audit})...)
	audited := time.Since(start)
	log, _ := validate.ReadAudit(audit)
	t.Logf("after the load: holders, clearing and new grants checked in %v; audit log: %d lines, %d runs, %d lines cut short, "+
		"%d cancelled as never committed (%d restarts found the last group uncommitted: a kill between its lines and its COMMIT), read in %v",
		after.Round(time.Millisecond), len(log.Entries), log.Starts, log.Torn, log.Cancelled, log.NotCommitted, audited.Round(time.Millisecond))
	return validate.Verify(t, h, scenarioCheckTimeout(failpoints), more...)
}

// logInFlight logs, for each kill in h, the requests the killed process
// had under way: sent before the kill and not answered before it. Those
// answered "unknown" are what the kill cut: blocked acquires waiting in a
// queue, and the rest (writes, releases, renews, acquires not waiting),
// which were in a group commit or waiting for the next one. A kill that
// cut none of the latter landed between two groups and proved little.
func logInFlight(t *testing.T, h *history.History) {
	t.Helper()
	ops := h.Ops()
	first := int64(0)
	for _, op := range ops {
		if first == 0 || op.Call < first {
			first = op.Call
		}
	}
	for i, f := range h.Faults() {
		if f.Kind != "kill" {
			continue
		}
		inFlight, unknown, blocked := 0, 0, 0
		for _, op := range ops {
			if op.Server != f.Server || op.Incarnation != f.Incarnation || op.Call > f.At || (!op.Output.Unknown && op.Return < f.At) {
				continue
			}
			inFlight++
			if op.Output.Unknown {
				unknown++
				if op.Input.Kind == history.Acquire && op.Input.Wait > 0 {
					blocked++
				}
			}
		}
		t.Logf("fault %d, kill -9 %v into the load: %d requests in flight, %d cut (unknown outcome): %d blocked acquires, %d in or awaiting a group commit",
			i, time.Duration(f.At-first).Round(time.Millisecond), inFlight, unknown, blocked, unknown-blocked)
	}
}

// TestCrashLoad: the crash scenario under the first crash tests' load must
// be clean, and the kills must have cut requests in a group commit.
func TestCrashLoad(t *testing.T) {
	r := runClean(t, "crash-load")
	if r.Faults < 5 {
		t.Errorf("%d faults recorded, want the first start, two kills and their restarts", r.Faults)
	}
	// A write, release or renew cut by a kill was in a group commit or
	// waiting for one (a blocked acquire may only have been waiting).
	if n := r.Outcomes["write unknown"] + r.Outcomes["release unknown"] + r.Outcomes["renew unknown"]; n == 0 {
		t.Errorf("no write, release or renew was cut by a kill: the kills did not land under load (%v)", r.Outcomes)
	}
}
