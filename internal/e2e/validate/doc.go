// Package validate holds the checks of the robustness tests
// (docs/robustness.md): what must hold of a recorded history whatever
// happened, from the answers and the server's own times (the invariant
// checks: exclusive holds, tokens, fencing, what the store kept, answers
// during faults, the service's time, lapses, wake-ups), porcupine's search
// for a linearization against the model (package model), and the checks a
// scenario runs beside them: answers against the API's document
// (APIChecker), inspect polled during the load (PollHolders), the state
// after it (CheckAfter), the audit log (CheckAudit), the Go client's Lost
// (LeaseLog, CheckLost), a stalled holder fenced out (CheckStalled) and
// each server's health clock (WatchHealth).
//
// Verify runs the invariant checks and porcupine, and writes the history
// and porcupine's picture out (package report); a violation names its
// check (CheckExclusive, CheckFencing, ...).
package validate
