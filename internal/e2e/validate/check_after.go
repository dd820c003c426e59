package validate

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
)

// The state a server shows once the load is over, typically after kills
// and restarts, against the history: the holders it kept, then new grants
// on a cleared lock. What the store kept is the final reads' part
// (traffic.Workload.FinalReads, checkInvariants).

// The names of the checks after the load.
const (
	CheckAfterHolders = "after-holders" // the holders shown are the ones the history leaves
	CheckAfterGrant   = "after-grant"   // a new grant works, above every token before, fenced
)

// afterWorker is the Op.Worker of the operations CheckAfter records.
const afterWorker = 1 << 20

// CheckAfter checks, through target, the state of every lock in locks once
// the load is over and nothing else runs, against h:
//
//   - CheckAfterHolders: by inspect, no exclusive holder beside another, a
//     lock with waiters has a holder (S3), an acknowledged grant not
//     released since is still held with its token, a lease whose release
//     was acknowledged is not held, every holder shown was asked for (an
//     acquire of that client on that lock that may have been granted, with
//     that token if it was answered) and holds a token no other grant got;
//   - CheckAfterGrant: once every holder and waiter shown was released
//     (through its own client id), a new client (after/LOCK) is granted
//     the lock at once, with a token above every token granted or shown
//     before, inspect shows it alone, the fence refuses a write with a
//     token below the highest write accepted before and accepts the new
//     token; the new lease is released at the end.
//
// The releases, grants and writes it sends are recorded in h (worker
// afterWorker), so that the invariant checks and porcupine judge them too:
// run it before Verify.
func CheckAfter(ctx context.Context, h *history.History, target cluster.Target, locks []string) []Violation {
	var vs violations
	hc := traffic.HTTPClient()
	rec := traffic.NewClient(h, afterWorker, target, hc)
	ops := h.Ops()
	inspect := func(lock string) (lk.InspectResult, bool) {
		var res lk.InspectResult
		var err error
		for range 20 {
			cl := client.New(target().URL, client.WithHTTPClient(hc), client.WithRateLimitWait(0))
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err = cl.Inspect(c, lock)
			cancel()
			if err == nil {
				return res, true
			}
			time.Sleep(100 * time.Millisecond)
		}
		vs.add(CheckAfterHolders, "inspect %s: %v", lock, err)
		return res, false
	}
	for _, lock := range locks {
		res, ok := inspect(lock)
		if !ok {
			continue
		}
		checkHoldersAfter(&vs, ops, lock, res)
		top := int64(0)
		for _, op := range ops {
			if granted(op) && op.Input.Lock == lock {
				top = max(top, op.Output.Token)
			}
		}
		for _, ho := range res.Holders {
			top = max(top, ho.Token)
		}
		// Clear the lock: release every holder and waiter, whose release
		// hands the lock to the next, until inspect shows it free.
		for round := 0; ; round++ {
			if len(res.Holders) == 0 && len(res.Queue) == 0 {
				break
			}
			if round == 100 {
				vs.add(CheckAfterGrant, "%s still held or awaited after %d rounds of releases: %+v", lock, round, res)
				break
			}
			for _, ho := range res.Holders {
				top = max(top, ho.Token)
				if r := rec.Release(ctx, ho.Client, lock); r.Output.Outcome != lk.Released {
					vs.add(CheckAfterGrant, "releasing a holder shown by inspect: %v", r)
				}
			}
			for _, w := range res.Queue {
				rec.Release(ctx, w.Client, lock) // withdrawn, or released if handed the lock meanwhile
			}
			if res, ok = inspect(lock); !ok {
				break
			}
		}
		checkNewGrant(&vs, ctx, rec, ops, lock, top, inspect)
	}
	return vs.result()
}

// checkHoldersAfter judges the holders and queue inspect showed on lock
// against the history ops.
func checkHoldersAfter(vs *violations, ops []history.Op, lock string, res lk.InspectResult) {
	shown := map[string]lk.Holder{}
	for _, ho := range res.Holders {
		shown[ho.Client] = ho
		if ho.Mode == lk.Exclusive && len(res.Holders) > 1 {
			vs.add(CheckAfterHolders, "%s: exclusive holder %s (token %d) beside %d other lease(s): %+v", lock, ho.Client, ho.Token, len(res.Holders)-1, res.Holders)
		}
	}
	if len(res.Holders) == 0 && len(res.Queue) > 0 {
		vs.add(CheckAfterHolders, "%s has waiters and no holder (S3: a queue head is granted on a free lock): %+v", lock, res.Queue)
	}
	// Per client, its acquires and releases of lock in order: the last
	// one, the last acknowledged grant, and whether any acquire may have
	// been granted (answered granted or queued, or unknown).
	type client struct {
		last, grant *history.Op
		mayHold     bool
	}
	byCall := slices.Clone(ops)
	slices.SortStableFunc(byCall, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	byClient := map[string]*client{}
	for i := range byCall {
		op := &byCall[i]
		if op.Input.Lock != lock || op.Output.Skipped() || (op.Input.Kind != history.Acquire && op.Input.Kind != history.Release) {
			continue
		}
		c := byClient[op.Input.Client]
		if c == nil {
			c = &client{}
			byClient[op.Input.Client] = c
		}
		c.last = op
		if op.Input.Kind == history.Acquire && (op.Output.Unknown || granted(*op) || op.Output.Outcome == lk.Queued) {
			c.mayHold = true
		}
		if granted(*op) {
			c.grant = op
		}
	}
	now := time.Now().Unix()
	for id, c := range byClient {
		ho, held := shown[id]
		switch {
		case c.last.Input.Kind == history.Release && c.last.Output.Known() && held:
			vs.add(CheckAfterHolders, "%s: %s holds it (token %d) after its release was answered: %v", lock, id, ho.Token, c.last)
		case c.last == c.grant && c.grant.Output.ExpiresAt > now+1 && (!held || ho.Token != c.grant.Output.Token):
			vs.add(CheckAfterHolders, "%s: %v, never released, is not held with its token (inspect shows %+v)", lock, c.grant, res.Holders)
		}
	}
	tokens := map[int64]history.Op{}
	for _, op := range ops {
		if granted(op) && op.Input.Lock == lock {
			tokens[op.Output.Token] = op
		}
	}
	for _, ho := range res.Holders {
		c := byClient[ho.Client]
		switch {
		case c == nil || !c.mayHold:
			vs.add(CheckAfterHolders, "%s: %s holds it (token %d), but never sent an acquire of it that may have been granted", lock, ho.Client, ho.Token)
		}
		if g, ok := tokens[ho.Token]; ok && g.Input.Client != ho.Client {
			vs.add(CheckAfterHolders, "%s: %s holds token %d, granted to %v", lock, ho.Client, ho.Token, g)
		}
	}
}

// checkNewGrant takes the cleared lock anew (CheckAfterGrant); top is the
// highest token granted or shown before.
func checkNewGrant(vs *violations, ctx context.Context, rec *traffic.Client, ops []history.Op, lock string, top int64, inspect func(string) (lk.InspectResult, bool)) {
	id := "after/" + lock
	a := rec.Acquire(ctx, id, lock, 300, lk.Exclusive, 0)
	if !granted(a) {
		vs.add(CheckAfterGrant, "%s, cleared, is not granted at once: %v", lock, a)
		if a.Output.Unknown || a.Output.Outcome == lk.Queued {
			rec.Release(ctx, id, lock)
		}
		return
	}
	token := a.Output.Token
	if token <= top {
		vs.add(CheckAfterGrant, "%s: %v has a token not above %d, granted or held before", lock, a, top)
	}
	if res, ok := inspect(lock); ok && (len(res.Holders) != 1 || res.Holders[0].Client != id || res.Holders[0].Token != token || len(res.Queue) > 0) {
		vs.add(CheckAfterGrant, "%s: inspect after %v shows %+v", lock, a, res)
	}
	accepted := int64(0)
	for _, op := range ops {
		if op.Input.Kind == history.Write && op.Input.Lock == lock && op.Output.Known() && op.Output.Outcome == lk.OK {
			accepted = max(accepted, op.Input.Token)
		}
	}
	if accepted > 1 {
		w := rec.Write(ctx, id, lock, "after-stale", fmt.Sprintf("%s-stale", id), accepted-1)
		if w.Output.Err != lk.CodeStaleToken {
			vs.add(CheckAfterGrant, "%s: a write with token %d, below the %d accepted before, is not refused as stale: %v (HTTP %d wanted)",
				lock, accepted-1, accepted, w, http.StatusConflict)
		}
	}
	if w := rec.Write(ctx, id, lock, "after", id, token); w.Output.Outcome != lk.OK {
		vs.add(CheckAfterGrant, "%s: a write with the new token %d is not accepted: %v", lock, token, w)
	}
	if r := rec.Release(ctx, id, lock); r.Output.Outcome != lk.Released {
		vs.add(CheckAfterGrant, "%s: releasing %v: %v", lock, a, r)
	}
}
