package e2e_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
)

// scenario is one robustness scenario: a workload on a cluster with its
// faults, run once as it is (its Test function requires a clean report)
// and, in a binary built with -tags failpoints, once per failpoint it
// names in catches, each of which the checks must report
// (TestFailpointsCaught).
type scenario struct {
	name string
	// run runs the scenario with the failpoints enabled in every server
	// and returns the checks' report, without failing t on violations.
	run func(t *testing.T, failpoints []string) validate.Result
	// catches are the failpoints this scenario must catch.
	catches []string
}

// scenarios is every registered scenario, in the order registered.
var scenarios []scenario

// register adds sc to scenarios; a scenario file calls it from a package
// variable's initializer: var _ = register(scenario{...}).
func register(sc scenario) bool {
	scenarios = append(scenarios, sc)
	return true
}

// runClean runs the scenario named name without failpoints and requires a
// clean report: the body of each scenario's Test function. A run whose only
// finding is that porcupine's search did not end in its time
// (validate.Result.Undecided) decided nothing either way, and the scenario
// runs again with a new seed, up to three runs: a search that ends must find
// a linearization, any other check's finding fails at once, and a search
// that ends in none of the three runs fails.
func runClean(t *testing.T, name string) validate.Result {
	t.Helper()
	for _, sc := range scenarios {
		if sc.name == name {
			return runScenario(t, sc, nil, 3, func(t *testing.T, r validate.Result, last bool) bool {
				if r.Undecided() && !last {
					t.Logf("%v: undecided; again, with a new seed", r)
					return true
				}
				r.RequireOK(t)
				return false
			})
		}
	}
	t.Fatalf("no scenario %q registered", name)
	return validate.Result{}
}

// runScenario runs sc with failpoints, up to runs times, and returns the
// last run's result. Each run is a subtest (run-1, run-2, ...) with a
// directory, a database, an audit log and servers of its own, stopped when
// it ends. (Two runs in one test would share its t.ArtifactDir(), whose
// database the first run's server, stopped only at the test's end, still
// holds: the second run's server would not start.) judge gets each run's
// result inside its subtest, with whether it is the last run allowed; it
// fails the subtest there, before the cluster's cleanup, which shows the
// servers' logs of a failed test, and returns whether to run again. A run
// that skips (no PostgreSQL) skips t; one that fails ends the runs.
func runScenario(t *testing.T, sc scenario, failpoints []string, runs int,
	judge func(t *testing.T, r validate.Result, last bool) (again bool)) validate.Result {
	t.Helper()
	var r validate.Result
	for i := 1; i <= runs; i++ {
		again, skipped := false, false
		ok := t.Run(fmt.Sprintf("run-%d", i), func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			r = validate.Result{} // what stays if the run stops (t.Fatal, t.Skip)
			r = sc.run(t, failpoints)
			again = judge(t, r, i == runs)
		})
		if skipped {
			t.SkipNow()
		}
		if !ok || !again {
			break
		}
	}
	return r
}

// TestScenarioRunsAgain: a second run of a scenario, as runClean and
// TestFailpointsCaught make when the first did not decide, is a run of its
// own on a cluster of its own, clean as the first.
func TestScenarioRunsAgain(t *testing.T) {
	i := slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.name == "pause-client" })
	var ops []int
	runScenario(t, scenarios[i], nil, 2, func(t *testing.T, r validate.Result, last bool) bool {
		r.RequireOK(t)
		ops = append(ops, r.Ops)
		return !last
	})
	if len(ops) != 2 || slices.Contains(ops, 0) {
		t.Errorf("runs of %v operations, want two runs that each did some", ops)
	}
}
