package e2e_test

import (
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

var _ = register(scenario{
	name: "proxy-cut-delay",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Postgres: true, Servers: 2, ProxyPostgres: true, Failpoints: failpoints})
		// The moments of the faults, in units of a run of 14 s; a
		// failpoint's run is half as long.
		unit := time.Second
		if len(failpoints) > 0 {
			unit /= 2
		}
		w := traffic.Workload{Duration: 14 * unit, Seed: seed}
		s := c.Servers[1]
		p := s.Proxy()
		done := make(chan struct{})
		go func() {
			defer close(done)
			traffic.Scenario{Workload: w}.Run(t, c, h)
		}()
		start := time.Now()
		sleepUntil(start, 3*unit)
		p.Cut()
		sleepUntil(start, 6*unit)
		p.Restore()
		took := awaitReady(t, s, 20*time.Second)
		t.Logf("server 1 ready %v after its connection to PostgreSQL came back", took.Round(time.Millisecond))
		recovered := h.Now()
		sleepUntil(start, 8*unit)
		p.Delay(200 * time.Millisecond)
		sleepUntil(start, 11*unit)
		p.Delay(0)
		<-done

		ops := h.Ops()
		cut, restored := faultAt(t, h, "cut-db", 1), faultAt(t, h, "restore-db", 1)
		delayed, undelayed := faultAt(t, h, "delay-db 200ms", 1), faultAt(t, h, "delay-db 0s", 1)
		during := answersIn(ops, 1, cut, restored)
		after := answersIn(ops, 1, recovered, delayed)
		slow := answersIn(ops, 1, delayed, undelayed)
		all := answersIn(ops, -1, 0, h.Now())
		t.Logf("server 1 cut off: %v", during)
		t.Logf("server 1 back: %v", after)
		t.Logf("server 1 delayed 200 ms: %v", slow)
		t.Logf("server 0 meanwhile: %v", answersIn(ops, 0, cut, undelayed))
		// Cut off, the server answers "unavailable", at once: not an
		// internal error, not silence.
		if during.counts["503"] == 0 {
			t.Errorf("server 1 answered no 503 while its database was cut off: %v", during)
		}
		if during.slowest > 5*time.Second {
			t.Errorf("server 1 took %v to answer an operation without wait while cut off", during.slowest)
		}
		for _, k := range []string{"500", "no answer"} {
			if all.counts[k] > 0 {
				t.Errorf("%d operations answered %s in the whole run: %v", all.counts[k], k, all)
			}
		}
		// Back on its own: writes acknowledged again, not just ready.
		if after.changed == 0 {
			t.Errorf("server 1 acknowledged no change once ready again: %v", after)
		}
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	},
	catches: []string{failpoint.AcceptStaleWrite},
})

// TestProxyCutDelay: two servers on one PostgreSQL schema, each through a
// TCP proxy, under the workload; three seconds in, server 1's connections
// to the database are cut and new ones refused for three seconds, and
// later every byte between them is held 200 ms each way for three
// seconds. Cut off, server 1 must answer 503 (unavailable), promptly, and
// never 500 or nothing; once the database is back it must be ready and
// acknowledge operations again on its own; and the whole history must
// pass every check.
func TestProxyCutDelay(t *testing.T) {
	runClean(t, "proxy-cut-delay")
}
