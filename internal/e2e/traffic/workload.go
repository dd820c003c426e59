package traffic

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/model"
)

// Workload is the lapse-free lock workload: workers that acquire a lock
// (exclusive mostly, shared sometimes; blocking mostly, at once sometimes),
// write to the fenced store with the token, read, renew now and then,
// release, and sometimes, a round or more later, write again with the token
// of a lease it released (a late job, which the fence must refuse once a
// successor wrote). Any
// unknown outcome, or an answer the worker did not want, is followed by
// releases until one has a known outcome, so that the client id holds and
// awaits nothing before the next round.
//
// Each worker uses one client id per lock ("w3/lock-1"), so that no client
// id ever waits for one lock while it holds or awaits another: the history
// then partitions by lock (model.Model). TTL is far beyond Duration, so
// that no lease lapses during the run but those Lapse abandons.
type Workload struct {
	Workers  int           // default 8
	Locks    int           // default 4
	Keys     int           // keys per lock in the store, default 2
	TTL      int64         // seconds, default 300: far beyond the run
	Wait     int64         // a blocking acquire's wait in seconds, default 5
	Duration time.Duration // default 10 s
	Seed     uint64        // the workers' randomness
	// Recover bounds how long a worker retries its release after an
	// unknown outcome (a server down for that long leaves the unknowns in
	// the history, which the checks allow for); default 30 s.
	Recover time.Duration
	// HTTP is the workers' HTTP client; default HTTPClient(). A
	// validate.APIChecker's checks every answer against the API's
	// document.
	HTTP *http.Client
	// Prefix goes before every lock name, so that runs one after the other
	// on one cluster touch different locks: each is a history of its own
	// (a soak's rounds).
	Prefix string
	// Lapse is the fraction of rounds in which a worker abandons its hold
	// without a release, so that it lapses (0: none, the lapse-free
	// workload). Such a hold is taken with a ttl of LapseTTL by a client
	// id used for it alone, and is written with, as a crashed job's would
	// be; its token serves the late job's writes. A workload with lapses
	// names its locks e2e/lapse-N (model.LapseLock): porcupine's model is
	// lapse-free and leaves those locks out (model.Operations), so the
	// invariant checks alone judge them, validate.CheckLapse among them.
	Lapse float64
	// LapseTTL is the ttl of the abandoned holds in seconds, default 1.
	LapseTTL int64
}

func (w Workload) defaults() Workload {
	if w.Workers == 0 {
		w.Workers = 8
	}
	if w.Locks == 0 {
		w.Locks = 4
	}
	if w.Keys == 0 {
		w.Keys = 2
	}
	if w.TTL == 0 {
		w.TTL = 300
	}
	if w.Wait == 0 {
		w.Wait = 5
	}
	if w.Duration == 0 {
		w.Duration = 10 * time.Second
	}
	if w.Recover == 0 {
		w.Recover = 30 * time.Second
	}
	if w.LapseTTL == 0 {
		w.LapseTTL = 1
	}
	return w
}

// LockName is the name of lock i of a workload.
func LockName(i int) string { return fmt.Sprintf("e2e/lock-%d", i) }

// lapseLockName is the name of lock i of a workload with lapses.
func lapseLockName(i int) string { return fmt.Sprintf("%s%d", model.LapseLock, i) }

func (w Workload) lockName(i int) string {
	if w.Lapse > 0 {
		return w.Prefix + lapseLockName(i)
	}
	return w.Prefix + LockName(i)
}

// keyName is the name of key i of the store.
func keyName(i int) string { return fmt.Sprintf("k%d", i) }

// Run runs the workload until its Duration has passed (or ctx ends), each
// worker with a recording client of its own on target(worker), and returns
// once every worker has finished its round and its recovery.
func (w Workload) Run(ctx context.Context, h *history.History, target func(worker int) cluster.Target) {
	w = w.defaults()
	deadline := time.Now().Add(w.Duration)
	hc := w.HTTP
	if hc == nil {
		hc = HTTPClient()
	}
	var wg sync.WaitGroup
	for i := range w.Workers {
		c := NewClient(h, i, target(i), hc)
		c.Timeout = 10 * time.Second
		wg.Go(func() { w.worker(ctx, c, i, deadline) })
	}
	wg.Wait()
}

func (w Workload) worker(ctx context.Context, c *Client, worker int, deadline time.Time) {
	rng := rand.New(rand.NewPCG(w.Seed, uint64(worker)))
	n := 0
	value := func() string {
		n++
		return fmt.Sprintf("w%d-%d", worker, n)
	}
	// late is the token of this worker's last exclusive lease on each
	// lock, released since, for the late job's writes.
	late := map[string]int64{}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lock := w.lockName(rng.IntN(w.Locks))
		id := fmt.Sprintf("w%d/%s", worker, lock)
		if token := late[lock]; token > 0 && rng.IntN(5) == 0 {
			// The late job: a write with the token of a lease released a
			// round or more ago. The fence refuses it once a successor
			// wrote, which by now is likely.
			c.Write(ctx, id, lock, keyName(rng.IntN(w.Keys)), value(), token)
			delete(late, lock)
		}
		mode := lk.Exclusive
		if rng.IntN(5) == 0 {
			mode = lk.Shared
		}
		wait := w.Wait
		if rng.IntN(4) == 0 {
			wait = 0
		}
		if w.Lapse > 0 && rng.Float64() < w.Lapse {
			// Abandoned: a client id that is never used again, so that
			// nothing but the lapse ends the lease.
			id := fmt.Sprintf("%s/lapse-%d", id, n)
			a := c.Acquire(ctx, id, lock, w.LapseTTL, mode, wait)
			if a.Output.Unknown || a.Output.Outcome != lk.Granted {
				w.recover(ctx, c, id, lock)
			} else if mode == lk.Exclusive && c.Write(ctx, id, lock, keyName(rng.IntN(w.Keys)), value(), a.Output.Token).Output.Outcome == lk.OK {
				late[lock] = a.Output.Token
			}
			continue
		}
		a := c.Acquire(ctx, id, lock, w.TTL, mode, wait)
		if a.Output.Unknown || a.Output.Outcome != lk.Granted {
			w.recover(ctx, c, id, lock)
			continue
		}
		token := a.Output.Token
		key := keyName(rng.IntN(w.Keys))
		ok := true
		if mode == lk.Exclusive {
			for range 1 + rng.IntN(2) {
				key = keyName(rng.IntN(w.Keys))
				if op := c.Write(ctx, id, lock, key, value(), token); op.Output.Outcome != lk.OK {
					ok = false // unknown, or refused: both say something went wrong
					break
				}
			}
		}
		if ok && rng.IntN(3) == 0 {
			ok = c.Read(ctx, id, lock, key, false).Output.Known()
		}
		if ok && rng.IntN(5) == 0 {
			ok = c.Renew(ctx, id, lock, w.TTL).Output.Outcome == lk.Renewed
		}
		if !ok {
			w.recover(ctx, c, id, lock)
			continue
		}
		if r := c.Release(ctx, id, lock); r.Output.Outcome != lk.Released {
			w.recover(ctx, c, id, lock)
			continue
		}
		if mode == lk.Exclusive {
			late[lock] = token
		}
	}
}

// recover releases id's lock until the outcome is known: released,
// withdrawn or not a holder, all of which leave id holding and awaiting
// nothing (a request still in flight may yet change that; the next acquire
// then answers client_busy, and recover runs again).
func (w Workload) recover(ctx context.Context, c *Client, id, lock string) {
	ctx = context.WithoutCancel(ctx)
	until := time.Now().Add(w.Recover)
	for time.Now().Before(until) {
		if c.Release(ctx, id, lock).Output.Known() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FinalReads reads every key of the workload's store, retrying unknown
// outcomes for up to a minute, as final reads (Input.Final) for
// the invariant checks (package validate). Run it with the workload done
// and the servers up.
func (w Workload) FinalReads(ctx context.Context, h *history.History, target cluster.Target) {
	w = w.defaults()
	c := NewClient(h, w.Workers, target, HTTPClient())
	until := time.Now().Add(time.Minute)
	for l := range w.Locks {
		for k := range w.Keys {
			for !c.Read(ctx, "final", w.lockName(l), keyName(k), true).Output.Known() && time.Now().Before(until) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// Scenario is a workload on a cluster with faults at set moments.
type Scenario struct {
	Workload Workload
	// Kills are moments, from the workload's start, at which a server is
	// killed with SIGKILL and started again at once (servers in turn).
	Kills []time.Duration
}

// Run runs the scenario on c, recording into h (which should be c's
// Options.History, for the faults), then the final reads. It fails tb if
// a server does not come back.
func (sc Scenario) Run(tb testing.TB, c *cluster.Cluster, h *history.History) {
	tb.Helper()
	w := sc.Workload.defaults()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(context.Background(), h, func(worker int) cluster.Target { return c.Target(worker) })
	}()
	start := time.Now()
	for i, at := range sc.Kills {
		select {
		case <-time.After(time.Until(start.Add(at))):
		case <-done:
		}
		s := c.Servers[i%len(c.Servers)]
		tb.Logf("e2e: kill -9 of server %d at %v", s.Index(), time.Since(start).Round(time.Millisecond))
		s.Kill()
		s.Start()
	}
	<-done
	w.FinalReads(context.Background(), h, c.Target(0))
}
