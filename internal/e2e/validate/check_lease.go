package validate

import "github.com/leasekeeper/leasekeeper/internal/e2e/history"

// CheckLeaseLength names the check that a lease lasts its ttl from its
// start, granted on the spot or from the queue alike (L2, L3).
const CheckLeaseLength = "lease-length"

// checkLeaseLength: every acknowledged grant says expires_at = granted_at
// + ttl. A server that counted a queued lease's ttl from the enqueue, or
// that kept the lapsed predecessor's expiry, says otherwise.
func checkLeaseLength(vs *violations, ops []history.Op) {
	for _, op := range ops {
		if granted(op) && op.Output.ExpiresAt-op.Output.GrantedAt != op.Input.TTL {
			vs.add(CheckLeaseLength, "%v: expires_at %d is not granted_at %d + ttl %d", op, op.Output.ExpiresAt, op.Output.GrantedAt, op.Input.TTL)
		}
	}
}
