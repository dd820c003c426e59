package e2e_test

import (
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
// clean report: the body of each scenario's Test function.
func runClean(t *testing.T, name string) validate.Result {
	t.Helper()
	for _, sc := range scenarios {
		if sc.name == name {
			r := sc.run(t, nil)
			r.RequireOK(t)
			return r
		}
	}
	t.Fatalf("no scenario %q registered", name)
	return validate.Result{}
}
