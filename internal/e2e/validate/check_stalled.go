package validate

import (
	"cmp"
	"slices"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// CheckStalledFenced is the check of incident INC-5127 (docs/contract.md,
// section 7): a holder stopped past its ttl, whose successor took the lock
// and wrote, is fenced out once it runs again.
const CheckStalledFenced = "stalled-fenced"

// Stalled names the parties of an INC-5127 run: the lock, the client ids
// whose writes are the stalled holder's and its successor's
// (Input.Client), and what the stalled holder's Lease said once its Lost
// was closed ("" if it never was).
type Stalled struct {
	Lock, Holder, Successor string
	Lost                    string
}

// CheckStalled checks an INC-5127 run recorded in h: every write of
// the stalled holder sent after the successor's first acknowledged write
// was answered stale_token; the final read of each key the successor
// wrote shows the successor's last acknowledged value there, with its
// token; and the stalled holder's Lease reported Lost. A run in which the
// successor wrote nothing, or the holder nothing after it, proves nothing
// and is reported too.
func CheckStalled(h *history.History, s Stalled) []Violation {
	var vs violations
	ops := h.Ops()
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
	var first *history.Op
	last := map[string]history.Op{} // the successor's last acknowledged write of each key
	for i, op := range ops {
		if op.Input.Kind == history.Write && op.Input.Lock == s.Lock && op.Input.Client == s.Successor && op.Output.Known() && op.Output.Outcome == lk.OK {
			if first == nil {
				first = &ops[i]
			}
			last[op.Input.Key] = op
		}
	}
	if first == nil {
		vs.add(CheckStalledFenced, "%s: no write of the successor %s was acknowledged: the run shows nothing", s.Lock, s.Successor)
		return vs.result()
	}
	after := 0
	for _, op := range ops {
		if op.Input.Kind != history.Write || op.Input.Lock != s.Lock || op.Input.Client != s.Holder || op.Call <= first.Return {
			continue
		}
		after++
		if !op.Output.Known() || op.Output.Err != lk.CodeStaleToken {
			vs.add(CheckStalledFenced, "%s: the stalled holder's write after the successor's %v was not refused as stale: %v", s.Lock, *first, op)
		}
	}
	if after == 0 {
		vs.add(CheckStalledFenced, "%s: the stalled holder %s wrote nothing after the successor's write %v: the run shows nothing", s.Lock, s.Holder, *first)
	}
	for key, w := range last {
		i := slices.IndexFunc(ops, func(op history.Op) bool {
			return op.Input.Kind == history.Read && op.Input.Final && op.Input.Lock == s.Lock && op.Input.Key == key && op.Output.Known()
		})
		if i < 0 {
			vs.add(CheckStalledFenced, "%s/%s: no final read", s.Lock, key)
			continue
		}
		r := ops[i]
		if r.Output.Value == nil || *r.Output.Value != w.Input.Value || r.Output.Token != w.Input.Token {
			vs.add(CheckStalledFenced, "%s/%s: the store kept %s, not the successor's last acknowledged write %v", s.Lock, key, r.Output, w)
		}
	}
	if s.Lost == "" {
		vs.add(CheckStalledFenced, "%s: the stalled holder %s's Lease never reported Lost", s.Lock, s.Holder)
	}
	return vs.result()
}
