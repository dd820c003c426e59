package repo

import lk "github.com/leasekeeper/leasekeeper"

// VerifyEnds has GrantPredecessors read what the writer's endsCache
// answers too, and hand both to fn, until the returned function is called.
func VerifyEnds(fn func(lock string, token int64, kept, read []lk.Predecessor)) (restore func()) {
	verifyEnds = fn
	return func() { verifyEnds = nil }
}

// VerifyHolds has GrantHoldTimes and ReadForQueueing read what the
// writer's endsCache answers too, and hand both to fn, until the returned
// function puts back the one before.
func VerifyHolds(fn func(lock string, kept, read []HoldEnd)) (restore func()) {
	prev := verifyHolds
	verifyHolds = fn
	return func() { verifyHolds = prev }
}

// HoldEnd is a hold time and where its end stands in its lock's end order.
type HoldEnd = holdEnd

// Key is where h's end stands in its lock's end order.
func (h HoldEnd) Key() (after, endedAt, token int64) { return h.after, h.endedAt, h.token }
