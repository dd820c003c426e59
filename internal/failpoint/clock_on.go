//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"time"
)

// started is when the process started, near enough: package
// initialization.
var started = time.Now()

// clockStep and clockAt are ClockStepBack's settings, read once at start.
var clockStep, clockAt = clockSettings()

func clockSettings() (step, at time.Duration) {
	step, at = -30*time.Second, 3*time.Second
	read := func(env string, d *time.Duration) {
		v := os.Getenv(env)
		if v == "" {
			return
		}
		p, err := time.ParseDuration(v)
		if err != nil {
			// A test that set it wrong must not silently test nothing.
			fmt.Fprintf(os.Stderr, "leasekeeper: %s=%q: %v\n", env, v, err)
			os.Exit(2)
		}
		*d = p
	}
	read(ClockStepEnv, &step)
	read(ClockAtEnv, &at)
	return step, at
}

// ClockOffset is what ClockStepBack adds to the server's clock now: its
// step once its moment has come, if it is enabled; else nothing.
func ClockOffset() time.Duration {
	if !enabled[ClockStepBack] || time.Since(started) < clockAt {
		return 0
	}
	return clockStep
}
