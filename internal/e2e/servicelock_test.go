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

// The service-row lock (docs/deployment.md) is what makes two servers on
// one PostgreSQL schema one service: without it, both read a free lock and
// both grant it. This scenario is made to show that: sixteen workers on
// sixteen locks through two servers, so that a lock is often free when two
// acquires of it race across the servers, and a history small enough for
// porcupine to conclude. (With few locks the lock is mostly held, and the
// race shows only as two queue entries at one position, which the
// database refuses: a 500, not a double grant.)
var _ = register(scenario{
	name: "service-lock-postgres",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Postgres: true, Servers: 2, Failpoints: failpoints})
		w := traffic.Workload{Workers: 16, Locks: 16, Duration: 6 * time.Second, Seed: seed}
		traffic.Scenario{Workload: w}.Run(t, c, h)
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	},
	catches: []string{failpoint.SkipServiceLock},
})

// TestServiceLockPostgres: eight workers on one lock through two servers
// on one PostgreSQL schema, without faults: every check must pass.
func TestServiceLockPostgres(t *testing.T) { runClean(t, "service-lock-postgres") }
