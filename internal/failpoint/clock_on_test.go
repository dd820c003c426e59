//go:build failpoints

package failpoint

import (
	"testing"
	"time"
)

// TestClockOffset: the step comes at its moment after the start, only
// with clock-step-back enabled, as the environment set it.
func TestClockOffset(t *testing.T) {
	t.Setenv(ClockStepEnv, "")
	t.Setenv(ClockAtEnv, "")
	if step, at := clockSettings(); step != -30*time.Second || at != 3*time.Second {
		t.Errorf("defaults: step %v at %v, want -30s at 3s", step, at)
	}
	t.Setenv(ClockStepEnv, "-5s")
	t.Setenv(ClockAtEnv, "1h")
	if step, at := clockSettings(); step != -5*time.Second || at != time.Hour {
		t.Errorf("step %v at %v, want -5s at 1h", step, at)
	}

	savedEnabled, savedStep, savedAt := enabled, clockStep, clockAt
	defer func() { enabled, clockStep, clockAt = savedEnabled, savedStep, savedAt }()
	clockStep, clockAt = -5*time.Second, time.Hour
	enabled = parse(ClockStepBack)
	if d := ClockOffset(); d != 0 {
		t.Errorf("offset %v before its moment", d)
	}
	clockAt = 0
	if d := ClockOffset(); d != -5*time.Second {
		t.Errorf("offset %v after its moment, want -5s", d)
	}
	enabled = parse(AcceptStaleWrite)
	if d := ClockOffset(); d != 0 {
		t.Errorf("offset %v with clock-step-back off", d)
	}
}
