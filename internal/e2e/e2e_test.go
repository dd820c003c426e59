package e2e_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.RemoveBinary()
	os.Exit(code)
}

// checkTimeout bounds porcupine's search; a run whose search does not end
// in time decided nothing, and runs again (runClean, runScenario).
const checkTimeout = time.Minute

// scenarioCheckTimeout is checkTimeout, shorter when failpoints are planted:
// a history with no linearization costs porcupine the whole search, and a
// run whose search runs out is run again (TestFailpointsCaught).
func scenarioCheckTimeout(failpoints []string) time.Duration {
	if len(failpoints) > 0 {
		return 20 * time.Second
	}
	return checkTimeout
}

// killsAt returns n moments in the middle of a run of length d, at random
// but in order and apart, for kill -9s.
func killsAt(rng *rand.Rand, n int, d time.Duration) []time.Duration {
	var out []time.Duration
	slot := d * 6 / 10 / time.Duration(n)
	for i := range n {
		out = append(out, d*2/10+time.Duration(i)*slot+time.Duration(rng.Int64N(int64(slot/2))))
	}
	return out
}

var _ = register(scenario{
	name: "kill-restart",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 0))
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints})
		w := traffic.Workload{Duration: 10 * time.Second, Seed: seed}
		if len(failpoints) > 0 {
			w.Duration = 4 * time.Second
		}
		traffic.Scenario{Workload: w, Kills: killsAt(rng, 2, w.Duration)}.Run(t, c, h)
		return validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	},
	catches: []string{failpoint.AcceptStaleWrite, failpoint.ReissueToken, failpoint.AnswerBeforeCommit, failpoint.DropWakeup, failpoint.SkipHandover},
})

// TestKillRestart is the crash scenario on SQLite: eight workers on four
// locks for ten seconds while the server is killed with SIGKILL twice, at
// random moments, and started again on the same file. Every invariant
// check and porcupine must pass: nothing acknowledged is lost or
// contradicted across the crashes.
func TestKillRestart(t *testing.T) {
	r := runClean(t, "kill-restart")
	if r.Faults < 4 {
		t.Errorf("%d faults recorded, want the two kills and their restarts", r.Faults)
	}
}

// TestFailpointsOnlyWithTag: the binary holds failpoints exactly when built
// with the tag: without it, not one symbol of package failpoint nor one
// failpoint's name is in it. (Binary builds with the tag when this test
// was built with it.)
func TestFailpointsOnlyWithTag(t *testing.T) {
	bin := cluster.Binary(t)
	out, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, out)
	}
	symbols := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "internal/failpoint.") {
			symbols++
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range failpoint.All {
		if bytes.Contains(b, []byte(name)) {
			names = append(names, name)
		}
	}
	t.Logf("built with failpoints: %v; %d symbols of package failpoint, failpoint names %v", failpoint.Compiled, symbols, names)
	if failpoint.Compiled != (symbols > 0) || failpoint.Compiled != (len(names) == len(failpoint.All)) {
		t.Errorf("built with failpoints: %v, but the binary has %d symbols of package failpoint and the names %v", failpoint.Compiled, symbols, names)
	}
}
