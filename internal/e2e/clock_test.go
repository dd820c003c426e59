//go:build failpoints

package e2e_test

import (
	"context"
	"slices"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// clockStep is how far the server's clock steps back: longer than a probe
// lease's ttl, so that a server that let its time follow the clock would
// hand the probe's lock over early, or answer times that go back.
const clockStep = -8 * time.Second

// lapseProbe holds a lock with a short ttl across the clock's step, with
// another client queued behind it, outside the workload's history (whose
// model has no lapses), and reports when the lease lapsed.
type lapseProbe struct {
	ttl        time.Duration
	granted    time.Time // the holder's grant answered (this machine's monotonic clock)
	expiresAt  int64     // as the server told the holder
	handedOver time.Time // the waiter first seen holding
	heldFrom   int64     // the waiter's granted_at: its expires_at less the ttl
	err        error
}

const probeLock = "e2e/clock-probe"

// run acquires probeLock as "probe/a" for ttl, queues "probe/b" behind it,
// and polls b's status until it holds the lock (the lease of a lapsed),
// for up to limit. It polls rather than waits, so that a server killed
// meanwhile does not lose the answer.
func (p *lapseProbe) run(ctx context.Context, s *cluster.Server, limit time.Duration) {
	cl := client.New(s.URL(), client.WithRateLimitWait(0))
	ttl := p.ttl
	a, err := cl.AcquireOnce(ctx, probeLock, client.AcquireOptions{Client: "probe/a", TTL: ttl})
	if err != nil || a.Outcome != lk.Granted {
		p.err = err
		return
	}
	p.granted, p.expiresAt = time.Now(), a.ExpiresAt
	if _, err := cl.AcquireOnce(ctx, probeLock, client.AcquireOptions{Client: "probe/b", TTL: ttl}); err != nil {
		p.err = err
		return
	}
	for until := time.Now().Add(limit); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
		st, err := client.New(s.URL(), client.WithRateLimitWait(0)).Status(ctx, "probe/b")
		if err != nil {
			continue // the server restarting
		}
		if i := slices.IndexFunc(st.Holds, func(h lk.Holder) bool { return h.Lock == probeLock }); i >= 0 {
			p.handedOver, p.heldFrom = time.Now(), st.Holds[i].ExpiresAt-int64(ttl/time.Second)
			return
		}
	}
}

var _ = register(scenario{
	name: "clock-step-back",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		// The step comes 3 s into the server process's life, which the
		// workload starts a moment after.
		t.Setenv(failpoint.ClockStepEnv, clockStep.String())
		t.Setenv(failpoint.ClockAtEnv, "3s")
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Failpoints: append(slices.Clone(failpoints), failpoint.ClockStepBack)})
		s := c.Servers[0]
		h.Fault(history.FaultClockStep, 0, 1, 0)
		health := validate.WatchHealth(c, 20*time.Millisecond)
		w := traffic.Workload{Duration: 10 * time.Second, Seed: seed}
		if len(failpoints) > 0 {
			w.Duration = 6 * time.Second
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			traffic.Scenario{Workload: w}.Run(t, c, h)
		}()
		start := time.Now()
		probe := &lapseProbe{ttl: 5 * time.Second}
		probed := make(chan struct{})
		go func() {
			defer close(probed)
			probe.run(context.Background(), s, 30*time.Second)
		}()
		// Halfway through the step's effect, a kill -9: the new process
		// starts with its clock already stepped back, below the time the
		// database was last moved to, which it must keep to.
		sleepUntil(start, 6*time.Second)
		if len(failpoints) == 0 {
			t.Setenv(failpoint.ClockAtEnv, "0s")
			t.Logf("e2e: kill -9 of server 0 at %v, restarted with its clock %v behind", time.Since(start).Round(time.Millisecond), -clockStep)
			s.Kill()
			s.Start()
		}
		<-done
		<-probed
		more := health.Stop(h)
		t.Logf("health polls answered with a clock: %v", health.Polls())

		switch {
		case probe.err != nil:
			t.Errorf("lapse probe: %v", probe.err)
		case probe.handedOver.IsZero():
			t.Errorf("the probe's lease of %v never lapsed within 30 s", probe.ttl)
		default:
			held := probe.handedOver.Sub(probe.granted)
			t.Logf("lapse probe: a lease of %v was handed over %v after its grant (the step holds the server's time still for up to %v); granted_at %d, predecessor's expires_at %d",
				probe.ttl, held.Round(time.Millisecond), -clockStep, probe.heldFrom, probe.expiresAt)
			// Early by this machine's clock, with the server's whole
			// seconds as margin, or by the server's own.
			if held < probe.ttl-time.Second || probe.heldFrom < probe.expiresAt {
				t.Errorf("the probe's lease lapsed early: handed over %v after its grant of %v; granted_at %d before the predecessor's expires_at %d",
					held, probe.ttl, probe.heldFrom, probe.expiresAt)
			}
		}
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints), more...)
	},
	catches: []string{failpoint.TimeBackwards},
})

// TestClockStepBack: one server on SQLite under the workload; 3 s into
// its life its own clock (failpoint clock-step-back: the real clock, for
// this process) steps 8 s back, and 6 s in it is killed and started
// again with its clock 8 s behind from the start. The server's time must
// never go back: the times in its answers (time-order) and its health
// clock, polled every 20 ms (health-clock), never decrease; a probe lease
// of 5 s across the step must not lapse before its 5 s (it lapses up to
// 8 s late: the server's time stands still until the clock catches up);
// and every other check stays clean.
func TestClockStepBack(t *testing.T) {
	runClean(t, "clock-step-back")
}
