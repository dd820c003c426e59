package validate

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
)

// Inspect polls during the load, judged against the history: what the
// server shows of its holders while it works (and across its kills), not
// only what its answers said. The polls stay out of the History, whose
// model has no inspect.

// CheckPolledHolders names the check of the holders inspect showed during
// the load.
const CheckPolledHolders = "polled-holders"

// HolderPoll is one inspect answer: a lock's holders, with the call and
// return times of the request on the History's clock.
type HolderPoll struct {
	Lock         string
	Call, Return int64
	Holders      []lk.Holder
}

// Poller inspects locks in turn, from several goroutines, until Stop.
type Poller struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	polls  []HolderPoll
}

// PollHolders starts n pollers that inspect locks in turn through target,
// each from another lock, recording every answer on h's clock. A request
// that fails (a server killed or starting) is left out.
func PollHolders(h *history.History, target cluster.Target, locks []string, n int) *Poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Poller{cancel: cancel}
	hc := traffic.HTTPClient()
	for i := range n {
		p.wg.Go(func() {
			var mine []HolderPoll
			for j := i; ctx.Err() == nil; j++ {
				lock := locks[j%len(locks)]
				cl := client.New(target().URL, client.WithHTTPClient(hc), client.WithRateLimitWait(0))
				c, stop := context.WithTimeout(ctx, 10*time.Second)
				call := h.Now()
				res, err := cl.Inspect(c, lock)
				ret := h.Now()
				stop()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mine = append(mine, HolderPoll{Lock: lock, Call: call, Return: ret, Holders: res.Holders})
			}
			p.mu.Lock()
			p.polls = append(p.polls, mine...)
			p.mu.Unlock()
		})
	}
	return p
}

// Stop ends the polls and returns them.
func (p *Poller) Stop() []HolderPoll {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.polls)
}

// CheckPolls judges polls against h (CheckPolledHolders): no poll shows
// an exclusive holder beside another; a (lock, token) is shown with one
// client only, the one it was granted to if its grant was answered; a
// holder shown had sent an acquire of the lock that may have been granted;
// a lease is not shown after its release was answered; and a poll sent
// after a grant was answered, and answered before the grantee sent its
// release, shows that lease (leases do not lapse in the workload: a
// workload with lapses needs expires_at checked here).
func CheckPolls(h *history.History, polls []HolderPoll) []Violation {
	var vs violations
	type lc struct{ lock, client string }
	type lt struct {
		lock  string
		token int64
	}
	ops := h.Ops()
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	byClient := map[lc][]history.Op{}
	grantOf := map[lt]history.Op{}
	for _, op := range ops {
		if op.Output.Skipped() || (op.Input.Kind != history.Acquire && op.Input.Kind != history.Release) {
			continue
		}
		k := lc{op.Input.Lock, op.Input.Client}
		byClient[k] = append(byClient[k], op)
		if granted(op) {
			grantOf[lt{op.Input.Lock, op.Output.Token}] = op
		}
	}
	// releaseAfter is the first release the grantee sent after g was
	// answered, if any.
	releaseAfter := func(g history.Op) (history.Op, bool) {
		for _, op := range byClient[lc{g.Input.Lock, g.Input.Client}] {
			if op.Input.Kind == history.Release && op.Call > g.Return {
				return op, true
			}
		}
		return history.Op{}, false
	}
	seen := map[lt]string{}
	byLock := map[string][]HolderPoll{}
	for _, p := range polls {
		byLock[p.Lock] = append(byLock[p.Lock], p)
		for _, ho := range p.Holders {
			if ho.Mode == lk.Exclusive && len(p.Holders) > 1 {
				vs.add(CheckPolledHolders, "inspect %s [%s, %s]: exclusive holder %s (token %d) beside %d other lease(s): %+v",
					p.Lock, ms(p.Call), ms(p.Return), ho.Client, ho.Token, len(p.Holders)-1, p.Holders)
			}
			k := lt{p.Lock, ho.Token}
			if c, ok := seen[k]; ok && c != ho.Client {
				vs.add(CheckPolledHolders, "inspect %s [%s, %s]: token %d held by %s, shown held by %s before", p.Lock, ms(p.Call), ms(p.Return), ho.Token, ho.Client, c)
			}
			seen[k] = ho.Client
			if g, ok := grantOf[k]; ok && g.Input.Client != ho.Client {
				vs.add(CheckPolledHolders, "inspect %s [%s, %s]: token %d held by %s, granted to %v", p.Lock, ms(p.Call), ms(p.Return), ho.Token, ho.Client, g)
			}
			asked := slices.ContainsFunc(byClient[lc{p.Lock, ho.Client}], func(op history.Op) bool {
				return op.Input.Kind == history.Acquire && op.Call < p.Return && (op.Output.Unknown || granted(op) || op.Output.Outcome == lk.Queued)
			})
			if !asked {
				vs.add(CheckPolledHolders, "inspect %s [%s, %s]: %s holds it (token %d), but had sent no acquire of it that may have been granted",
					p.Lock, ms(p.Call), ms(p.Return), ho.Client, ho.Token)
			}
			if g, ok := grantOf[k]; ok && g.Input.Client == ho.Client {
				if r, ok := releaseAfter(g); ok && r.Output.Known() && r.Output.Outcome == lk.Released && r.Return < p.Call {
					vs.add(CheckPolledHolders, "inspect %s [%s, %s]: %s still holds token %d after %v", p.Lock, ms(p.Call), ms(p.Return), ho.Client, ho.Token, r)
				}
			}
		}
	}
	for _, g := range grantOf {
		r, released := releaseAfter(g)
		for _, p := range byLock[g.Input.Lock] {
			if p.Call <= g.Return || (released && p.Return >= r.Call) {
				continue
			}
			if !slices.ContainsFunc(p.Holders, func(ho lk.Holder) bool { return ho.Client == g.Input.Client && ho.Token == g.Output.Token }) {
				vs.add(CheckPolledHolders, "inspect %s [%s, %s] does not show %v, answered before it and not released yet: %+v",
					p.Lock, ms(p.Call), ms(p.Return), g, p.Holders)
			}
		}
	}
	return vs.result()
}
