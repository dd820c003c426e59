package e2e_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/model"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// Two `leasekeeper serve` on one PostgreSQL schema, as behind a load
// balancer: every transaction of either server first locks the service
// row, and each hears of the other's grants through LISTEN/NOTIFY. Each
// worker sends its operations to one server then the other, so that a
// lease granted through one is written under, renewed and released
// through the other, and an acquire blocked on one is answered by a
// release on the other: the figures of the first two-server test.

// pgLocks is the number of locks of the two-server scenarios. The old
// test had 5 for its 50 workers; 10 waiters to a lock at once made
// porcupine's search of one lock's history run past its minute on a
// loaded 2-core machine (CI), where 5 to a lock takes seconds.
const pgLocks = 10

func pgLockNames() []string {
	var out []string
	for i := range pgLocks {
		out = append(out, traffic.LockName(i))
	}
	return out
}

// serverTarget sends every operation to server i of c.
func serverTarget(c *cluster.Cluster, i int) cluster.Target {
	return func() cluster.Endpoint { return c.Servers[i].Endpoint() }
}

// withLapses is the lapse workload that runs beside w in the two-server
// scenarios, as the old test let a grant in twenty-five lapse: ten workers
// on two locks of their own (e2e/lapse-N), whose abandoned leases either
// server's lapse timer must retire and hand over (CheckLapse). Porcupine
// leaves those locks out.
func withLapses(w traffic.Workload) traffic.Workload {
	return traffic.Workload{Workers: 10, Locks: 2, Lapse: 1.0 / 25, Duration: w.Duration, Seed: w.Seed + 1}
}

// runBoth runs w and its lapse workload at once on c, each worker's
// operations spread over the servers by target(c, worker).
func runBoth(c *cluster.Cluster, h *history.History, w traffic.Workload, target func(*cluster.Cluster, int) cluster.Target) {
	l := withLapses(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(context.Background(), h, func(worker int) cluster.Target { return target(c, worker+1) })
	}()
	w.Run(context.Background(), h, func(worker int) cluster.Target { return target(c, worker) })
	<-done
}

// liveTarget is Cluster.Target but for the servers that are gone: as the
// old test's clients did, once a server is dead the workers go to the
// others (in flight at the kill, an operation is unknown all the same).
func liveTarget(c *cluster.Cluster, first int) cluster.Target {
	var mu sync.Mutex
	next := first
	return func() cluster.Endpoint {
		mu.Lock()
		defer mu.Unlock()
		for range len(c.Servers) {
			s := c.Servers[next%len(c.Servers)]
			next++
			if s.Pid() != 0 {
				return s.Endpoint()
			}
		}
		return c.Servers[next%len(c.Servers)].Endpoint()
	}
}

// lapsed counts the grants on the lapse workload's locks.
func lapseGrants(h *history.History) int {
	n := 0
	for _, op := range h.Ops() {
		if model.IsLapseLock(op.Input.Lock) && op.Input.Kind == history.Acquire && op.Output.Outcome == lk.Granted {
			n++
		}
	}
	return n
}

// afterLoad reads the store back through each server in up, then checks
// each lock's state through them (CheckAfter), recording into h, and
// checks the servers' audit logs: what every multi-server scenario does
// once its load is over. It returns the extra violations.
func afterLoad(c *cluster.Cluster, h *history.History, w traffic.Workload, locks []string, up ...int) []validate.Violation {
	vs := afterLoadNoAudit(c, h, w, locks, up...)
	var logs [][]string
	for _, s := range c.Servers {
		logs = append(logs, s.Logs())
	}
	return append(vs, validate.CheckAudit(h, logs...)...)
}

// afterLoadNoAudit is afterLoad without the audit logs' check.
func afterLoadNoAudit(c *cluster.Cluster, h *history.History, w traffic.Workload, locks []string, up ...int) []validate.Violation {
	ctx := context.Background()
	for _, s := range up {
		w.FinalReads(ctx, h, serverTarget(c, s))
		withLapses(w).FinalReads(ctx, h, serverTarget(c, s))
	}
	var vs []validate.Violation
	for _, s := range up {
		vs = append(vs, validate.CheckAfter(ctx, h, serverTarget(c, s), locks)...)
	}
	return vs
}

// crossWakeups counts the blocked acquires granted after they waited whose
// lock was last released, before the grant was answered, through the
// other server: the hand-overs that only LISTEN/NOTIFY (or a recheck) can
// have told the waiting server about.
func crossWakeups(h *history.History) int {
	ops := h.Ops()
	n := 0
	for _, g := range ops {
		if g.Input.Kind != history.Acquire || g.Input.Wait == 0 || !g.Output.Known() || g.Output.Outcome != lk.Granted ||
			g.Return-g.Call < int64(50*time.Millisecond) {
			continue
		}
		var last *history.Op
		for i, r := range ops {
			if r.Input.Kind == history.Release && r.Input.Lock == g.Input.Lock && r.Output.Outcome == lk.Released &&
				r.Call > g.Call && r.Return < g.Return && (last == nil || r.Return > last.Return) {
				last = &ops[i]
			}
		}
		if last != nil && last.Server != g.Server {
			n++
		}
	}
	return n
}

var _ = register(scenario{
	name: "two-servers-postgres",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Postgres: true, Servers: 2, Failpoints: failpoints})
		w := traffic.Workload{Workers: 50, Locks: pgLocks, Duration: 16 * time.Second, Seed: seed}
		if len(failpoints) > 0 {
			w.Duration = 6 * time.Second
		}
		runBoth(c, h, w, (*cluster.Cluster).Target)
		extra := afterLoad(c, h, w, pgLockNames(), 0, 1)
		r := validate.Verify(t, h, scenarioCheckTimeout(failpoints), extra...)
		if len(failpoints) == 0 {
			requireBothServersWorked(t, h, 2)
			t.Logf("%d grants on the lapse workload's locks", lapseGrants(h))
			if n := crossWakeups(h); n == 0 {
				t.Error("no blocked acquire was granted after a release through the other server")
			} else {
				t.Logf("%d blocked acquires granted after a release through the other server", n)
			}
		}
		return r
	},
	catches: []string{failpoint.SkipServiceLock, failpoint.WarmSurvivesWrite},
})

// requireBothServersWorked: each of the first n servers granted something.
func requireBothServersWorked(t *testing.T, h *history.History, n int) {
	t.Helper()
	grants := make([]int, n)
	for _, op := range h.Ops() {
		if op.Input.Kind == history.Acquire && op.Output.Known() && op.Output.Outcome == lk.Granted && op.Server < n {
			grants[op.Server]++
		}
	}
	t.Logf("grants answered by each server: %v", grants)
	for s, g := range grants {
		if g == 0 {
			t.Errorf("server %d answered no grant: it did no work", s)
		}
	}
}

// TestTwoServersPostgres: fifty workers on ten locks for sixteen seconds
// through two servers on one PostgreSQL schema, without faults. Every
// check must pass, both servers must have worked, and at least one
// blocked acquire must have been granted after a release through the
// other server.
func TestTwoServersPostgres(t *testing.T) {
	runClean(t, "two-servers-postgres")
}

var _ = register(scenario{
	name: "kill-each-postgres",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 0))
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Postgres: true, Servers: 2, Failpoints: failpoints})
		w := traffic.Workload{Duration: 8 * time.Second, Seed: seed}
		traffic.Scenario{Workload: w, Kills: killsAt(rng, 2, w.Duration)}.Run(t, c, h)
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	},
	catches: []string{failpoint.ReissueToken},
})

// TestKillEachPostgres: two servers on one PostgreSQL schema, each killed
// with SIGKILL once, at random moments, and started again, while the
// workload goes on through both.
func TestKillEachPostgres(t *testing.T) {
	runClean(t, "kill-each-postgres")
}

var _ = register(scenario{
	name: "server-dies-postgres",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 0))
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Postgres: true, Servers: 2, Failpoints: failpoints})
		w := traffic.Workload{Workers: 20, Locks: pgLocks, Duration: 10 * time.Second, Seed: seed}
		done := make(chan struct{})
		go func() {
			defer close(done)
			runBoth(c, h, w, liveTarget)
		}()
		dead := c.Servers[1]
		time.Sleep(4*time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		dead.Kill()
		killedAt := h.Now()
		t.Logf("killed server 1 at %.3fs, for good", float64(killedAt)/1e9)
		<-done
		extra := afterLoad(c, h, w, pgLockNames(), 0)
		r := validate.Verify(t, h, scenarioCheckTimeout(failpoints), extra...)
		if len(failpoints) == 0 {
			requireBothServersWorked(t, h, 2)
			missed := 0
			for _, op := range h.Ops() {
				if op.Server == 1 && !op.Output.Known() {
					missed++
				}
			}
			if missed == 0 {
				t.Error("no operation sent to the killed server went unanswered: the kill caught nothing in flight")
			}
		}
		return r
	},
	catches: []string{failpoint.AcceptStaleWrite},
})

// TestServerDiesMidLoad: twenty workers on ten locks for ten seconds
// through two servers on one PostgreSQL schema; four to five seconds in,
// one server is killed with SIGKILL and never comes back. The workers go
// on through the survivor (an operation sent to the dead one is refused
// before it is sent, and the worker settles with a release on the other);
// every check must pass.
func TestServerDiesMidLoad(t *testing.T) {
	runClean(t, "server-dies-postgres")
}
