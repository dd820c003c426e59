package e2e

// FaultClockStep notes that a server's own clock was set to step (the
// failpoint clock-step-back) at or after this moment: from then on the
// server's seconds (granted_at, expires_at) need not be this machine's,
// and a check that reads them as this machine's time must not judge the
// operations that follow.
const FaultClockStep = "clock-step"
