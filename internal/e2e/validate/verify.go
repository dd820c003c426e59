package validate

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/model"
	"github.com/leasekeeper/leasekeeper/internal/e2e/report"
)

// checkLinearizable checks the history against model.Model with porcupine,
// within timeout. An Unknown result (the search ran out of time) proves
// nothing either way: Verify reports it as a violation, which
// Result.Undecided tells apart from a finding (a scenario's test runs
// again). info is porcupine's, for its picture (report.SaveLinearization).
func checkLinearizable(h *history.History, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(model.Model, model.Operations(h.Ops(), h.Faults(), h.AnswerSettle()), timeout)
}

// Result is what Verify found.
type Result struct {
	Ops, Unknown, Faults int
	Violations           []Violation // of checkInvariants, and checkLinearizable's verdict when not Ok
	Linearizable         porcupine.CheckResult
	CheckTime            time.Duration // porcupine's
	// Outcomes counts the operations by kind and outcome ("acquire
	// granted", "write stale_token", "release unknown"): what the run
	// exercised.
	Outcomes map[string]int
}

// outcome names an operation's kind and outcome, for Result.Outcomes.
func outcome(op history.Op) string {
	o := op.Output
	switch {
	case o.Unknown:
		return string(op.Input.Kind) + " unknown"
	case o.NotSent:
		return string(op.Input.Kind) + " not_sent"
	case o.NotApplied:
		return string(op.Input.Kind) + " not_applied"
	case o.Err != "":
		return string(op.Input.Kind) + " " + string(o.Err)
	case o.Outcome != "":
		return string(op.Input.Kind) + " " + string(o.Outcome)
	case o.Value == nil:
		return string(op.Input.Kind) + " null"
	}
	return string(op.Input.Kind) + " value"
}

// OK reports whether every check passed.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Undecided reports whether the run's only finding is that porcupine's
// search did not end within its time: no check found anything, and the
// linearization was neither found nor ruled out.
func (r Result) Undecided() bool {
	return r.Linearizable == porcupine.Unknown &&
		!slices.ContainsFunc(r.Violations, func(v Violation) bool { return v.Check != CheckLinearization })
}

// Caught reports whether check found something.
func (r Result) Caught(check string) bool {
	for _, v := range r.Violations {
		if v.Check == check {
			return true
		}
	}
	return false
}

// Checks lists the checks that found something.
func (r Result) Checks() []string {
	var out []string
	for _, v := range r.Violations {
		if !strings.Contains(strings.Join(out, ","), v.Check) {
			out = append(out, v.Check)
		}
	}
	return out
}

func (r Result) String() string {
	return fmt.Sprintf("%d operations (%d unknown), %d faults; linearizable: %s in %v; violations: %d %v",
		r.Ops, r.Unknown, r.Faults, r.Linearizable, r.CheckTime.Round(time.Millisecond), len(r.Violations), r.Checks())
}

// Verify runs the invariant checks and porcupine on h, logs the summary,
// and saves the history (history.jsonl) and, when porcupine found no
// linearization, its picture (linearization.html) in tb.ArtifactDir, kept
// by go test -artifacts. It does not fail tb: the caller decides whether
// violations were wanted. more are the violations of checks the caller
// ran itself (CheckAfter, CheckAudit), reported with the rest.
func Verify(tb testing.TB, h *history.History, timeout time.Duration, more ...Violation) Result {
	tb.Helper()
	ops := h.Ops()
	r := Result{Ops: len(ops), Faults: len(h.Faults()), Outcomes: map[string]int{}}
	for _, op := range ops {
		if op.Output.Unknown {
			r.Unknown++
		}
		r.Outcomes[outcome(op)]++
	}
	r.Violations = append(checkInvariants(h), more...)
	start := time.Now()
	res, info := checkLinearizable(h, timeout)
	r.CheckTime, r.Linearizable = time.Since(start), res
	if res != porcupine.Ok {
		msg := "no linearization of the history exists"
		if res == porcupine.Unknown {
			msg = fmt.Sprintf("the search did not end within %v: nothing decided", timeout)
		}
		r.Violations = append(r.Violations, Violation{Check: CheckLinearization, Message: msg})
	}
	dir := tb.ArtifactDir()
	if err := report.SaveHistory(filepath.Join(dir, "history.jsonl"), h); err != nil {
		tb.Errorf("e2e: saving the history: %v", err)
	}
	if res == porcupine.Illegal {
		if err := report.SaveLinearization(filepath.Join(dir, "linearization.html"), info); err != nil {
			tb.Logf("e2e: porcupine's picture: %v", err)
		}
	}
	names := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		names = append(names, k)
	}
	slices.Sort(names)
	var counts []string
	for _, k := range names {
		counts = append(counts, fmt.Sprintf("%s %d", k, r.Outcomes[k]))
	}
	tb.Logf("e2e: %s (history and pictures in %s)\n\toutcomes: %s", r, dir, strings.Join(counts, ", "))
	tb.Logf("e2e: wake-up: %s", wakeSummary(h))
	return r
}

// RequireOK fails tb with every violation unless the report has none.
func (r Result) RequireOK(tb testing.TB) {
	tb.Helper()
	for _, v := range r.Violations {
		tb.Errorf("%v", v)
	}
}
