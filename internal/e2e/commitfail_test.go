//go:build failpoints

package e2e_test

import (
	"slices"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

var _ = register(scenario{
	name: "commit-then-fail",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Failpoints: append(slices.Clone(failpoints), failpoint.CommitThenFail)})
		h.Fault(history.FaultCommitThenFail, 0, 1, 0)
		w := traffic.Workload{Duration: 8 * time.Second, Seed: seed}
		traffic.Scenario{Workload: w}.Run(t, c, h)
		r := validate.Verify(t, h, scenarioCheckTimeout(failpoints))
		unknown, notApplied := 0, 0
		for _, op := range h.Ops() {
			switch {
			case op.Output.Unknown && op.Output.Status != 0:
				unknown++
			case op.Output.NotApplied:
				notApplied++
			}
		}
		t.Logf("answered 503 with the outcome unknown: %d; with \"applied\": false: %d", unknown, notApplied)
		if unknown+notApplied == 0 {
			t.Errorf("no operation was answered 503: the failpoint %s did not strike", failpoint.CommitThenFail)
		}
		return r
	},
	catches: []string{failpoint.WrongNotApplied},
})

// TestCommitThenFail (issue 20): one server on SQLite under the workload,
// whose every eighth group's COMMIT reaches the database and is then
// answered as a failed one (failpoint commit-then-fail, as a connection
// lost after the database received the COMMIT). The server must answer
// those operations 503 without "applied": false, since they did happen;
// the recording client trusts an "applied": false as a client would, so a
// server that says it of a committed operation (failpoint
// wrong-not-applied) leaves effects that no operation explains, which the
// checks catch (TestFailpointsCaught).
func TestCommitThenFail(t *testing.T) {
	runClean(t, "commit-then-fail")
}
