package model

import (
	"math"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// LapseLock begins the name of every lock of a workload with lapses (after
// its prefix): the model is lapse-free and leaves those locks out.
const LapseLock = "e2e/lapse-"

// IsLapseLock reports whether lock is one of a workload with lapses
// (whatever its Prefix), which the lapse-free model leaves out.
func IsLapseLock(lock string) bool { return strings.Contains(lock, LapseLock) }

// Operations turns recorded operations into porcupine's, each returning
// as Returns says. An operation that was never sent is left out, and so
// are the locks of a workload with lapses (IsLapseLock).
func Operations(ops []history.Op, faults []history.Fault, answerSettle time.Duration) []porcupine.Operation {
	returns := Returns(faults, answerSettle)
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Output.Skipped() || IsLapseLock(op.Input.Lock) {
			continue // a lapse is a move no operation shows: not the model's
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Worker,
			Input:    stepInput{in: op.Input, call: op.Call, answer: op.Return},
			Call:     op.Call,
			Output:   op.Output,
			Return:   returns(op),
		})
	}
	return out
}

// Returns gives the moment by which an operation took effect, if it did:
// its return, for a known outcome. An unknown outcome returns never
// (math.MaxInt64), so that porcupine may place it anywhere after its call,
// or nowhere that matters; but an operation sent to a process that was
// killed took effect by the kill's Settled or never, so it returns then
// (etcd's robustness tests patch their histories with what they know in
// the same way); so does one answered 5xx during a database outage
// (outageSettled); and one the server answered 5xx, answerSettle after its
// answer (History.SetAnswerSettle), unless that is negative: unknown.
func Returns(faults []history.Fault, answerSettle time.Duration) func(history.Op) int64 {
	settle5xx := int64(answerSettle)
	settled := map[[2]int]int64{}
	for _, f := range faults {
		if f.Kind == "kill" {
			settled[[2]int{f.Server, f.Incarnation}] = f.Settled
		}
	}
	outages := dbOutages(faults)
	return func(op history.Op) int64 {
		if !op.Output.Unknown {
			return op.Return
		}
		ret := int64(math.MaxInt64)
		if s, ok := settled[[2]int{op.Server, op.Incarnation}]; ok && s > op.Call {
			ret = s
		}
		if s, ok := outageSettled(op, outages); ok {
			ret = min(ret, s)
		}
		if op.Output.Status >= 500 && settle5xx >= 0 {
			// The server answered: whatever the operation did, it
			// did by then (plus what the database may still commit).
			ret = min(ret, op.Return+settle5xx)
		}
		return ret
	}
}

// outage is a database outage: from a FaultPrimaryCrash to the
// FaultPromote after it.
type outage struct{ crash, promote, settled int64 }

func dbOutages(faults []history.Fault) []outage {
	var out []outage
	crash := int64(-1)
	for _, f := range faults {
		switch {
		case f.Kind == history.FaultPrimaryCrash && crash < 0:
			crash = f.At
		case f.Kind == history.FaultPromote && crash >= 0:
			out = append(out, outage{crash: crash, promote: f.At, settled: f.Settled})
			crash = -1
		}
	}
	return out
}

// outageSettled bounds an unknown outcome that a server answered (a 503)
// during an outage, the request sent before the promotion: it took effect
// by the promotion's Settled, or never. The server gave up on its
// transaction when it answered; a COMMIT the dead primary had received
// is on the standby or lost, and the standby shows what it has once
// promoted. No request is answered by a database between the crash and the
// promotion, so that is where the model may place it.
func outageSettled(op history.Op, outages []outage) (int64, bool) {
	if !op.Output.Unknown || op.Output.Status == 0 {
		return 0, false
	}
	for _, o := range outages {
		if op.Call < o.promote && op.Return >= o.crash {
			return max(op.Return, o.settled), true
		}
	}
	return 0, false
}
