package validate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// The checks that hold whatever the model: they need no linearization,
// only the acknowledged answers, their times and the server's own times
// (granted_at, expires_at), so they hold for workloads in which leases
// lapse too.

// The names of the invariant checks, as Violation.Check says them.
const (
	CheckExclusive     = "exclusive"            // never two holders at once but shared ones
	CheckTokenUnique   = "token-unique"         // a token is granted once per lock
	CheckTokenOrder    = "token-order"          // tokens grow with real time, and with granted_at
	CheckTokenCrash    = "token-reissued-crash" // no token reissued after a crash (a token-order case worth its name)
	CheckFencing       = "fencing"              // no write accepted below a token already accepted
	CheckFalseStale    = "stale-without-higher" // stale_token only when a higher token could have been accepted
	CheckLostWrite     = "lost-write"           // the final read sees the last acknowledged write, or a later one
	CheckPhantomValue  = "phantom-value"        // the final read sees a value some write sent
	CheckLinearization = "linearizable"         // porcupine found a linearization (checkLinearizable)
	maxPerCheck        = 20                     // violations kept per check; the rest are counted
	expiryMarginSecond = int64(time.Second)     // the server's seconds against this machine's clock
)

// Violation is one thing a checker found wrong.
type Violation struct {
	Check   string
	Message string
}

func (v Violation) String() string { return v.Check + ": " + v.Message }

type violations struct {
	list  []Violation
	count map[string]int
}

func (vs *violations) add(check, format string, args ...any) {
	if vs.count == nil {
		vs.count = map[string]int{}
	}
	vs.count[check]++
	if vs.count[check] <= maxPerCheck {
		vs.list = append(vs.list, Violation{Check: check, Message: fmt.Sprintf(format, args...)})
	}
}

func (vs *violations) result() []Violation {
	for check, n := range vs.count {
		if n > maxPerCheck {
			vs.list = append(vs.list, Violation{Check: check, Message: fmt.Sprintf("... and %d more", n-maxPerCheck)})
		}
	}
	return vs.list
}

// never is the return time of an unknown outcome.
const never = math.MaxInt64

func returned(op history.Op) int64 {
	if op.Output.Unknown {
		return never
	}
	return op.Return
}

func granted(op history.Op) bool {
	return op.Input.Kind == history.Acquire && op.Output.Known() && op.Output.Outcome == lk.Granted
}

// checkInvariants runs every invariant check on h's operations and faults.
func checkInvariants(h *history.History) []Violation {
	ops, faults := h.Ops(), h.Faults()
	// In return order (the history is, but for goroutines that took their
	// time between the answer and the record).
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
	var vs violations
	checkExclusive(&vs, h, ops)
	checkTokens(&vs, ops, faults)
	checkFencing(&vs, ops)
	checkFinalReads(&vs, ops)
	checkLapse(&vs, ops, faults)
	checkWake(&vs, h, ops, faults)
	checkAnswers(&vs, ops, faults)
	checkTimeOrder(&vs, ops)
	checkLeaseLength(&vs, ops)
	return vs.result()
}

// hold is a lease as its client knew it: from the answer of its grant to
// the call of its release, or to its expiry as the server last told it.
type hold struct {
	grant      history.Op
	start, end int64
}

// checkExclusive: two holds of one lock, one of them exclusive, must not
// overlap. A hold runs from the grant's answer (the server granted before
// it) to the release's call (the server released after it), cut at the
// lease's expiry (less a second: the server's clock is read in whole
// seconds) for the lapses of workloads that have them. Both holders then
// rightly believed they held the lock, at the same moment.
func checkExclusive(vs *violations, h *history.History, ops []history.Op) {
	byLock := map[string][]hold{}
	for i, g := range ops {
		if !granted(g) {
			continue
		}
		end, expires := int64(never), g.Output.ExpiresAt
		for _, op := range ops[i+1:] {
			// ops are in return order: every later operation of the
			// client that was sent after the grant's answer is here.
			if op.Input.Client != g.Input.Client || op.Input.Lock != g.Input.Lock || op.Call < g.Return {
				continue
			}
			if op.Input.Kind == history.Renew && op.Output.Known() && op.Output.Outcome == lk.Renewed && op.Call < end {
				expires = max(expires, op.Output.ExpiresAt)
			}
			if op.Input.Kind == history.Release {
				end = op.Call // its renews came before: the client sends one operation at a time
				break
			}
		}
		if expires > 0 {
			lapse := int64(time.Unix(expires, 0).Sub(h.Start())) - expiryMarginSecond
			end = min(end, lapse)
		}
		if end > g.Return {
			byLock[g.Input.Lock] = append(byLock[g.Input.Lock], hold{grant: g, start: g.Return, end: end})
		}
	}
	for lock, hs := range byLock {
		slices.SortFunc(hs, func(a, b hold) int { return cmp.Compare(a.start, b.start) })
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if b.start >= a.end {
					break
				}
				if a.grant.Input.Mode == lk.Shared && b.grant.Input.Mode == lk.Shared {
					continue
				}
				vs.add(CheckExclusive, "%s held by %s (%s, token %d) and %s (%s, token %d) at once: %s granted at %s, %s granted at %s, before the first released",
					lock, a.grant.Input.Client, a.grant.Input.Mode, a.grant.Output.Token,
					b.grant.Input.Client, b.grant.Input.Mode, b.grant.Output.Token,
					a.grant.Input.Client, ms(a.start), b.grant.Input.Client, ms(b.start))
			}
		}
	}
}

// checkTokens: per lock, a token is granted once; a grant answered before
// another was sent has the lower token (and when a server was killed in
// between, the higher one was issued after the crash: "reissued after a
// crash"); and tokens grow with the server's granted_at.
func checkTokens(vs *violations, ops []history.Op, faults []history.Fault) {
	byLock := map[string][]history.Op{}
	for _, op := range ops {
		if granted(op) {
			byLock[op.Input.Lock] = append(byLock[op.Input.Lock], op)
		}
	}
	crashBetween := func(from, to int64) bool {
		return slices.ContainsFunc(faults, func(f history.Fault) bool { return f.Kind == "kill" && f.At > from && f.At < to })
	}
	for lock, gs := range byLock {
		byToken := map[int64]history.Op{}
		for _, g := range gs {
			if prev, dup := byToken[g.Output.Token]; dup {
				vs.add(CheckTokenUnique, "%s token %d granted twice: %v and %v", lock, g.Output.Token, prev, g)
				continue
			}
			byToken[g.Output.Token] = g
		}
		// gs is in return order. For each grant, the highest token of the
		// grants answered before it was sent.
		top := highestSoFar(gs, func(op history.Op) int64 { return op.Output.Token })
		for _, b := range gs {
			n := sort.Search(len(gs), func(i int) bool { return gs[i].Return >= b.Call })
			if n == 0 || top[n-1].Output.Token < b.Output.Token {
				continue
			}
			a := top[n-1]
			check := CheckTokenOrder
			if crashBetween(a.Return, b.Call) {
				check = CheckTokenCrash
			}
			vs.add(check, "%s token %d granted after token %d was answered: %v after %v", lock, b.Output.Token, a.Output.Token, b, a)
		}
		byTok := slices.Clone(gs)
		slices.SortFunc(byTok, func(a, b history.Op) int { return cmp.Compare(a.Output.Token, b.Output.Token) })
		for i := 1; i < len(byTok); i++ {
			a, b := byTok[i-1], byTok[i]
			if a.Output.Token < b.Output.Token && a.Output.GrantedAt > b.Output.GrantedAt {
				vs.add(CheckTokenOrder, "%s token %d granted at %d, before token %d at %d", lock, b.Output.Token, b.Output.GrantedAt, a.Output.Token, a.Output.GrantedAt)
			}
		}
	}
}

// checkFencing: a write accepted after another was accepted and answered
// carries a token at least as high (L6); a write refused as stale had a
// token below one that could have been accepted before it was answered.
func checkFencing(vs *violations, ops []history.Op) {
	byLock := map[string][]history.Op{}
	for _, op := range ops {
		if op.Input.Kind == history.Write {
			byLock[op.Input.Lock] = append(byLock[op.Input.Lock], op)
		}
	}
	for lock, ws := range byLock {
		var ok []history.Op // accepted, in return order
		for _, w := range ws {
			if w.Output.Known() && w.Output.Outcome == lk.OK {
				ok = append(ok, w)
			}
		}
		top := highestSoFar(ok, func(op history.Op) int64 { return op.Input.Token })
		for _, b := range ok {
			n := sort.Search(len(ok), func(i int) bool { return ok[i].Return >= b.Call })
			if n > 0 && b.Input.Token < top[n-1].Input.Token {
				a := top[n-1]
				vs.add(CheckFencing, "%s accepted token %d after it accepted token %d: %v after %v", lock, b.Input.Token, a.Input.Token, b, a)
			}
		}
		for _, r := range ws {
			if !r.Output.Known() || r.Output.Err != lk.CodeStaleToken {
				continue
			}
			higher := slices.ContainsFunc(ws, func(w history.Op) bool {
				return w.Input.Token > r.Input.Token && w.Call < r.Return && (w.Output.Unknown || w.Output.Outcome == lk.OK)
			})
			if !higher {
				vs.add(CheckFalseStale, "%s refused token %d as stale, but no higher token was accepted before: %v", lock, r.Input.Token, r)
			}
		}
	}
}

// checkFinalReads: a final read (Input.Final) shows the value of a write
// that may have been accepted, with its token, and no write acknowledged
// after that write was answered is lost.
func checkFinalReads(vs *violations, ops []history.Op) {
	type lk2 struct{ lock, key string }
	writes := map[lk2][]history.Op{}
	for _, op := range ops {
		if op.Input.Kind == history.Write {
			k := lk2{op.Input.Lock, op.Input.Key}
			writes[k] = append(writes[k], op)
		}
	}
	for _, r := range ops {
		if r.Input.Kind != history.Read || !r.Input.Final || !r.Output.Known() {
			continue
		}
		k := lk2{r.Input.Lock, r.Input.Key}
		ws := writes[k]
		if r.Output.Value == nil {
			for _, w := range ws {
				if w.Output.Known() && w.Output.Outcome == lk.OK {
					vs.add(CheckLostWrite, "%s/%s reads null after the store acknowledged %v", k.lock, k.key, w)
					break
				}
			}
			continue
		}
		i := slices.IndexFunc(ws, func(w history.Op) bool {
			return w.Input.Value == *r.Output.Value && (w.Output.Unknown || w.Output.Outcome == lk.OK)
		})
		if i < 0 {
			vs.add(CheckPhantomValue, "%s/%s reads %q, which no write that may have been accepted sent: %v", k.lock, k.key, *r.Output.Value, r)
			continue
		}
		x := ws[i]
		if r.Output.Token != x.Input.Token {
			vs.add(CheckPhantomValue, "%s/%s reads %q with token %d, written with token %d: %v", k.lock, k.key, *r.Output.Value, r.Output.Token, x.Input.Token, r)
		}
		for _, w := range ws {
			if w.ID != x.ID && w.Output.Known() && w.Output.Outcome == lk.OK && w.Call > returned(x) {
				vs.add(CheckLostWrite, "%s/%s reads %q of %v, but %v was acknowledged after it", k.lock, k.key, *r.Output.Value, x, w)
			}
		}
	}
}

// ms is a time of the history, for messages.
func ms(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// highestSoFar returns, for each i, the operation of ops[:i+1] with the
// highest key (the first of equals).
func highestSoFar(ops []history.Op, key func(history.Op) int64) []history.Op {
	out := make([]history.Op, len(ops))
	for i, op := range ops {
		out[i] = op
		if i > 0 && key(out[i-1]) >= key(op) {
			out[i] = out[i-1]
		}
	}
	return out
}
