package repo

import lk "github.com/leasekeeper/leasekeeper"

// VerifyEnds has GrantPredecessors read what the writer's endsCache
// answers too, and hand both to fn, until the returned function is called.
func VerifyEnds(fn func(lock string, token int64, kept, read []lk.Predecessor)) (restore func()) {
	verifyEnds = fn
	return func() { verifyEnds = nil }
}
