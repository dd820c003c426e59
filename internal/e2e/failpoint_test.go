//go:build failpoints

package e2e_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// caughtBy names, for each failpoint, the checks of which at least one
// must report it: the checkers bite.
var caughtBy = map[string][]string{
	failpoint.AcceptStaleWrite: {e2e.CheckFencing, e2e.CheckLinearization},
	failpoint.ReissueToken:     {e2e.CheckTokenCrash, e2e.CheckTokenUnique, e2e.CheckLinearization},
}

const failpointCheckTimeout = 20 * time.Second

// TestFailpointsCaught runs the crash scenario once per failpoint, planted
// in the server, and requires the checks to report a violation for each.
// (TestKillRestart, the same scenario on the same binary without a
// failpoint enabled, passes.)
func TestFailpointsCaught(t *testing.T) {
	for _, fp := range failpoint.All {
		t.Run(fp, func(t *testing.T) {
			want, ok := caughtBy[fp]
			if !ok {
				t.Fatalf("failpoint %s has no entry in caughtBy", fp)
			}
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			h := e2e.NewHistory()
			c := e2e.Start(t, e2e.Options{History: h, Failpoints: []string{fp}})
			w := e2e.Workload{Duration: 4 * time.Second, Seed: seed}
			e2e.Scenario{Workload: w, Kills: killsAt(rng, 2, w.Duration)}.Run(t, c, h)
			// A history with no linearization costs porcupine the whole
			// search: a shorter bound, whose running out counts as a
			// violation all the same.
			r := e2e.Verify(t, h, failpointCheckTimeout)
			if r.OK() {
				t.Fatalf("failpoint %s was planted, but no check reported a violation", fp)
			}
			for i, v := range r.Violations {
				if i == 5 {
					t.Logf("caught: ... %d more", len(r.Violations)-i)
					break
				}
				t.Logf("caught: %v", v)
			}
			if !slices.ContainsFunc(want, r.Caught) {
				t.Errorf("failpoint %s was reported by %v, want one of %v", fp, r.Checks(), want)
			}
		})
	}
}
