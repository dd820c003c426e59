package e2e_test

import (
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

var _ = register(scenario{
	name: "lapse",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints})
		w := traffic.Workload{Duration: 8 * time.Second, Seed: seed, Lapse: 0.2, LapseTTL: 1}
		if len(failpoints) > 0 {
			w.Duration = 4 * time.Second
		}
		traffic.Scenario{Workload: w}.Run(t, c, h)
		abandoned, handedOver := lapses(h, w.LapseTTL)
		t.Logf("e2e: %d holds abandoned, %d waiters handed a lapsed lock", abandoned, handedOver)
		if abandoned == 0 || handedOver == 0 {
			t.Errorf("the run had %d abandoned holds and %d hand-overs at a lapse: it tested nothing of lapses", abandoned, handedOver)
		}
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	},
	catches: []string{failpoint.GrantEarly},
})

// lapses counts the holds the workload abandoned (granted with the lapse
// ttl, which no other hold has) and the blocked acquires granted at the expiry of one of them (or a
// second before: grant-early's hand-over must count, for its run to test
// something).
func lapses(h *history.History, ttl int64) (abandoned, handedOver int) {
	expiries := map[[2]any]bool{}
	ops := h.Ops()
	for _, op := range ops {
		if op.Input.Kind == history.Acquire && op.Output.Known() && op.Output.Outcome == lk.Granted && op.Input.TTL == ttl {
			abandoned++
			expiries[[2]any{op.Input.Lock, op.Output.ExpiresAt}] = true
		}
	}
	for _, op := range ops {
		if op.Input.Kind == history.Acquire && op.Input.Wait > 0 && op.Output.Known() && op.Output.Outcome == lk.Granted &&
			op.Return-op.Call > int64(100*time.Millisecond) &&
			(expiries[[2]any{op.Input.Lock, op.Output.GrantedAt}] || expiries[[2]any{op.Input.Lock, op.Output.GrantedAt + 1}]) {
			handedOver++
		}
	}
	return abandoned, handedOver
}

// TestLapse: workers abandon a fifth of their holds, taken with a ttl of a
// second, so that they lapse while others wait for the lock. The hand-over
// must come at the lapsed lease's expiry, not before (lapse-handover), the
// waiter must hear of it at once (wake-up), and the rest of the invariant
// checks hold with lapses. The lapse-free model leaves these locks out.
func TestLapse(t *testing.T) { runClean(t, "lapse") }
