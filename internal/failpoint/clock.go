package failpoint

// TimeBackwards is a bug, in All: the server's time follows its clock
// back. Planted with ClockStepBack, which gives it a clock that goes back.
const TimeBackwards = "time-backwards"

// Faults of the environment, planted in the server like failpoints but
// of another kind: not bugs that the checks must catch (All), but things
// done to a correct server that it must withstand, the checks staying
// clean.
const (
	// ClockStepBack steps the server's own clock (server/clock.go, the
	// real clock) by ClockStepEnv, ClockAtEnv after the process started:
	// as an NTP step would, for this process only.
	ClockStepBack = "clock-step-back"
	// CommitThenFail makes every CommitThenFailEvery-th COMMIT of a
	// group (internal/engine/runner.go) reach the database and then
	// answer the group's operations as if it had failed, as a connection
	// lost after the database received the COMMIT would: the server must
	// answer their outcome as unknown.
	CommitThenFail = "commit-then-fail"
)

// CommitThenFailEvery is how often CommitThenFail strikes: one group's
// COMMIT in so many.
const CommitThenFailEvery = 8

// Faults lists the faults of the environment, apart from All.
var Faults = []string{ClockStepBack, CommitThenFail}

// The environment variables that set ClockStepBack: the step, a Go
// duration, negative to step back (default -30s), and how long after the
// process started it comes (default 3s).
const (
	ClockStepEnv = "LEASEKEEPER_FAILPOINT_CLOCK_STEP"
	ClockAtEnv   = "LEASEKEEPER_FAILPOINT_CLOCK_AT"
)
