package validate

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// The service's time (the database's clock, in whole seconds) never runs
// backwards, whichever server reads it and across a failover: the promise
// S4 and the lapse rules rest on.

// The names of the checks on the service's time.
const (
	CheckTimeOrder   = "time-order"   // an operation sent after another was answered ran at a time no lower
	CheckHealthClock = "health-clock" // each server's /v1/health answers, and its clock never decreases
)

// serverTime is the time an acknowledged operation ran at, by its answer:
// a grant's granted_at (on the spot, its transaction's time; from the
// queue, the hand-over's, while the request waited), a renew's expires_at
// less its ttl.
func serverTime(op history.Op) (int64, bool) {
	switch {
	case granted(op):
		return op.Output.GrantedAt, true
	case op.Input.Kind == history.Renew && op.Output.Known() && op.Output.Outcome == lk.Renewed:
		return op.Output.ExpiresAt - op.Input.TTL, true
	}
	return 0, false
}

// checkTimeOrder: an operation sent after another was answered ran at a
// time at least as high, whichever servers ran them. ops are in return
// order.
func checkTimeOrder(vs *violations, ops []history.Op) {
	var timed []history.Op
	for _, op := range ops {
		if _, ok := serverTime(op); ok {
			timed = append(timed, op)
		}
	}
	at := func(op history.Op) int64 { t, _ := serverTime(op); return t }
	top := highestSoFar(timed, at)
	for _, b := range timed {
		n := sort.Search(len(timed), func(i int) bool { return timed[i].Return >= b.Call })
		if n > 0 && at(top[n-1]) > at(b) {
			a := top[n-1]
			vs.add(CheckTimeOrder, "time ran backwards: %v ran at %d, after %v, answered before it was sent, ran at %d", b, at(b), a, at(a))
		}
	}
}

// HealthWatch polls each server's GET /v1/health, which does not touch the
// database: it must answer status ok with a clock, whatever the database
// does, and the clock must never decrease.
type HealthWatch struct {
	c      *cluster.Cluster
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	polls  [][]healthPoll // by server
}

type healthPoll struct {
	at     time.Time
	status int
	res    lk.HealthResult
	err    error
}

// WatchHealth starts polling every server of c, every every, until Stop.
func WatchHealth(c *cluster.Cluster, every time.Duration) *HealthWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &HealthWatch{c: c, cancel: cancel, polls: make([][]healthPoll, len(c.Servers))}
	hc := &http.Client{Timeout: 5 * time.Second}
	for i, s := range c.Servers {
		w.wg.Go(func() {
			for ctx.Err() == nil {
				p := healthPoll{at: time.Now()}
				resp, err := hc.Get(s.URL() + "/v1/health")
				if err == nil {
					p.status = resp.StatusCode
					err = json.NewDecoder(resp.Body).Decode(&p.res)
					resp.Body.Close()
				}
				p.err = err
				w.mu.Lock()
				w.polls[i] = append(w.polls[i], p)
				w.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(every):
				}
			}
		})
	}
	return w
}

// Stop ends the polling and checks what it saw (CheckHealthClock). Polls
// of a server that was killed, stopped or paused meanwhile are not judged
// for want of an answer; h gives the faults.
func (w *HealthWatch) Stop(h *history.History) []Violation {
	w.cancel()
	w.wg.Wait()
	var vs violations
	faults := h.Faults()
	for server, polls := range w.polls {
		down := func(at time.Time) bool {
			// The server's last fault before at (or during the poll's 5 s).
			d := false
			for _, f := range faults {
				if f.Server != server || h.Wall(f.At).After(at.Add(5*time.Second)) {
					continue
				}
				if !h.Wall(f.At).Before(at) {
					return true
				}
				d = f.Kind == "kill" || f.Kind == "stop" || f.Kind == "pause"
			}
			return d
		}
		last := int64(0)
		for _, p := range polls {
			if p.err != nil || p.status != http.StatusOK || p.res.Status != "ok" || p.res.Clock == nil {
				if !down(p.at) {
					vs.add(CheckHealthClock, "server %d's /v1/health at %s: HTTP %d %+v %v", server, ms(int64(p.at.Sub(h.Start()))), p.status, p.res, p.err)
				}
				continue
			}
			if *p.res.Clock < last {
				vs.add(CheckHealthClock, "server %d's clock went back from %d to %d at %s", server, last, *p.res.Clock, ms(int64(p.at.Sub(h.Start()))))
			}
			last = max(last, *p.res.Clock)
		}
	}
	return vs.result()
}

// Polls is how many polls of each server answered with a clock.
func (w *HealthWatch) Polls() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int, len(w.polls))
	for i, ps := range w.polls {
		out[i] = len(slices.DeleteFunc(slices.Clone(ps), func(p healthPoll) bool { return p.res.Clock == nil }))
	}
	return out
}
