package validate

import (
	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/model"
)

// CheckLapse names the check that a lapsed lease is handed over at its
// expiry, not before (L3): exact, in the server's own seconds.
const CheckLapse = "lapse-handover"

// checkLapse: a lease that lapsed ended at the last expires_at the server
// told its holder (its grant's, or a later renew's), so a lease of the same
// lock that conflicts with it (one of the two exclusive) and has a higher
// token was granted no earlier: granted_at >= that expires_at. Both times
// are the server's, so the comparison needs no margin.
//
// A lease lapsed when its holder sent no release after the grant, or the
// first release answered not_holder. A release with any other outcome, an
// unknown one included, may have ended it sooner, and the lease is left
// out; so is one whose holder sent, before the grant was answered, a
// release whose outcome is unknown and that may have taken effect after
// the grant was made (model.Returns): a cleanup release stuck in a paused
// server, say, that ends the lease its client took meanwhile through
// another one, as porcupine's model lets it. A renew with an unknown
// outcome may have moved the expiry later, which only raises the bound
// this check uses as the lower one. ops are in return order.
func checkLapse(vs *violations, ops []history.Op, faults []history.Fault) {
	returned := model.Returns(faults, -1)
	byLock := map[string][]history.Op{}
	unknownReleases := map[[2]string][]history.Op{} // by client and lock
	for _, op := range ops {
		if granted(op) {
			byLock[op.Input.Lock] = append(byLock[op.Input.Lock], op)
		}
		if op.Input.Kind == history.Release && op.Output.Unknown {
			k := [2]string{op.Input.Client, op.Input.Lock}
			unknownReleases[k] = append(unknownReleases[k], op)
		}
	}
	for i, g := range ops {
		if !granted(g) {
			continue
		}
		expires, lapsed := g.Output.ExpiresAt, true
		for _, op := range unknownReleases[[2]string{g.Input.Client, g.Input.Lock}] {
			if op.Call < g.Return && returned(op) > g.Call {
				lapsed = false
				break
			}
		}
		for _, op := range ops[i+1:] {
			if !lapsed {
				break
			}
			if op.Input.Client != g.Input.Client || op.Input.Lock != g.Input.Lock || op.Call < g.Return {
				continue
			}
			if op.Input.Kind == history.Renew && op.Output.Known() && op.Output.Outcome == lk.Renewed {
				expires = max(expires, op.Output.ExpiresAt)
			}
			if op.Input.Kind == history.Release {
				lapsed = op.Output.Known() && op.Output.Err == lk.CodeNotHolder
				break
			}
			if op.Input.Kind == history.Acquire {
				// The same client acquiring again: the workloads never
				// do while holding, so the lease ended somehow.
				lapsed = false
				break
			}
		}
		if !lapsed {
			continue
		}
		for _, b := range byLock[g.Input.Lock] {
			if b.Output.Token <= g.Output.Token || (b.Input.Mode == lk.Shared && g.Input.Mode == lk.Shared) {
				continue
			}
			if b.Output.GrantedAt < expires {
				vs.add(CheckLapse, "%s token %d granted at %d, before token %d (%s, %s) lapsed at %d: %v after %v",
					g.Input.Lock, b.Output.Token, b.Output.GrantedAt, g.Output.Token, g.Input.Client, g.Input.Mode, expires, b, g)
			}
		}
	}
}
