package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// committer is group commit: operations wait in calls; it takes whatever is
// waiting, runs them in order in one transaction (one that fails fails
// the group: runner.do), then those that came meanwhile (late), commits
// once, and only then answers them. While one group syncs to disk the next
// one forms, so a busy server syncs once for many operations and an idle
// one answers at once. It also keeps the server's
// time: each operation runs at tick's ts.
type committer struct {
	r     *runner
	clock Clock
	log   *slog.Logger
	obs   Observer
	// failed is called when a group's commit failed: its events were
	// dropped with it, though a commit cut off may have happened, so
	// blocked acquires must read their state.
	failed func()
	// ran is called after each operation is answered: the next expiry may
	// have moved.
	ran func()
	// ready is told each write's failure, and each group's outcome.
	ready *readiness
	ctx   context.Context // ends with Close

	calls chan *pending
	done  chan struct{} // closed when the loop has stopped

	seenLocks, seenClients []string // window's

	lastTS atomic.Int64 // the last ts used; never decreases
	// dbClock: time is the common database's clock, not this machine's;
	// offset is how far the database's clock was ahead of this machine's
	// at the last group, for setting the lapse timer.
	dbClock bool
	offset  atomic.Int64 // nanoseconds
}

// maxGroup bounds how many operations share one commit.
const maxGroup = 512

// ErrClosed is returned for operations submitted after Close.
var ErrClosed = errors.New("engine closed")

// pending is one operation waiting for the committer: exec runs it at the ts
// the committer gives it.
type pending struct {
	name string // for the log
	// ahead is its first read, sent ahead of it (window), and the lock and
	// client it is about; zero where neither is known.
	ahead repo.Warm
	exec  func(ctx context.Context, ts int64) error
	err   error
	done  chan struct{}
}

// submit hands exec to the committer, which runs it at the server's time in
// the next group, and returns its result once the group is durable.
func (c *committer) submit(ctx context.Context, name string, exec func(ctx context.Context, ts int64) error) error {
	return c.submitAhead(ctx, name, repo.Warm{}, exec)
}

// submitAhead is submit for an operation whose first read is ahead.
func (c *committer) submitAhead(ctx context.Context, name string, ahead repo.Warm, exec func(ctx context.Context, ts int64) error) error {
	cl := &pending{name: name, ahead: ahead, exec: exec, done: make(chan struct{})}
	select {
	case c.calls <- cl:
	case <-c.ctx.Done():
		return ErrClosed
	}
	// Once submitted, an operation runs whether or not its caller still
	// listens: the caller learns its fate only here. A call the committer
	// never took, because it stopped, never ran.
	select {
	case <-cl.done:
	case <-c.done:
		select {
		case <-cl.done:
		default:
			return ErrClosed
		}
	}
	c.ran()
	return cl.err
}

// loop runs groups until the engine closes.
func (c *committer) loop() {
	// After this, submit stops waiting for calls nobody will take (the
	// lapse timer's among them, which Close waits for).
	defer close(c.done)
	var carried []*pending // late calls a failed group did not run
	for {
		group := carried
		carried = nil
		if len(group) == 0 {
			select {
			case first := <-c.calls:
				group = []*pending{first}
			case <-c.ctx.Done():
				return // Close answers what is left
			}
		}
		group = append(group, c.waiting(len(group))...)
		// Operations run to completion even while the engine closes: a
		// statement cut off half-way would only turn into an error.
		ctx := context.WithoutCancel(c.ctx)
		start, trips := time.Now(), c.r.db.RoundTrips()
		answered := false
		err := c.r.groupRun(ctx, c.window(group, 0), func() {
			c.runAll(ctx, group)
			// The calls that came while the group waited for its
			// transaction and ran join it. On a database with peers a
			// group first waits for the lock every server's transactions
			// take, while another server's group holds it, and its
			// clients' next calls arrive during that wait: run in this
			// group, they share its turn at the lock and its commit
			// instead of waiting for a turn of their own.
			if late := c.waiting(len(group)); len(late) > 0 {
				if !c.r.lateStart(c.window(late, 0)) {
					// The group failed (its last writes went with this
					// round trip): they have not run, and go first in the
					// next group.
					carried = late
				} else {
					c.runAll(ctx, late)
					group = append(group, late...)
				}
			}
			if failpoint.Enabled(failpoint.AnswerBeforeCommit) {
				// The fault: answers sent for a transaction not yet
				// durable; the sleep widens the window a kill -9 needs.
				for _, cl := range group {
					close(cl.done)
				}
				answered = true
				time.Sleep(20 * time.Millisecond)
			}
		})
		if c.obs != nil {
			c.obs.GroupCommitted(GroupStats{Ops: len(group), Duration: time.Since(start), RoundTrips: c.r.db.RoundTrips() - trips})
		}
		for _, cl := range group {
			if cl.err != nil {
				c.ready.failed(cl.err) // its group did not commit either
			}
		}
		c.ready.afterGroup(err, func() error { return c.r.checkpoint(ctx) })
		if answered {
			continue
		}
		if err != nil {
			c.failed()
		}
		for _, cl := range group {
			if err != nil {
				cl.err = err
			}
			close(cl.done)
		}
	}
}

// waiting takes the calls waiting now, without blocking, so that a group
// of n calls grows to maxGroup at most: when a group forms, and again once
// it has run (its late calls).
func (c *committer) waiting(n int) []*pending {
	var calls []*pending
	for n+len(calls) < maxGroup {
		select {
		case cl := <-c.calls:
			calls = append(calls, cl)
		default:
			return calls
		}
	}
	return calls
}

// aheadWindow bounds how many operations' first reads go ahead at once.
const aheadWindow = 32

// window is what goes ahead before group[i] runs (PostgreSQL, where each
// read is a round trip): the first reads of the operations from i on,
// stopping at one whose lock and client are not known, and at
// aheadWindow. A read is left out when an operation before it in the
// window names its lock or its client: that one's writes would drop its
// rows (repo.Tx.SendAhead), so it goes out once that one has run. The
// reads that do go are still dropped by whatever changes them.
func (c *committer) window(group []*pending, i int) []repo.Warm {
	var ws []repo.Warm
	locks, clients := c.seenLocks[:0], c.seenClients[:0]
	for j := i; j < len(group) && j < i+aheadWindow; j++ {
		lock, client, ok := group[j].ahead.Key()
		if !ok {
			break
		}
		if !slices.Contains(locks, lock) && !slices.Contains(clients, client) ||
			failpoint.Enabled(failpoint.WarmSurvivesWrite) { // the fault: all go, and stay
			ws = append(ws, group[j].ahead)
		}
		locks, clients = append(locks, lock), append(clients, client)
	}
	c.seenLocks, c.seenClients = locks, clients
	return ws
}

// runAll runs group's calls in order, in the open group, each with the
// reads of those after it that can go ahead.
func (c *committer) runAll(ctx context.Context, group []*pending) {
	for i, cl := range group {
		if i > 0 {
			c.r.sendAhead(c.window(group, i))
		}
		c.run(ctx, cl)
	}
}

// run executes one call inside the group. A panic is a bug, but it must not
// take the server down: the call answers an internal error, and its group
// fails (runner.do), the calls after it without running.
func (c *committer) run(ctx context.Context, cl *pending) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("operation panicked", "op", cl.name, "panic", p, "stack", string(debug.Stack()))
			cl.err = fmt.Errorf("operation %s panicked: %v", cl.name, p)
		}
	}()
	cl.err = cl.exec(ctx, c.tick())
}

// tick returns the ts for an operation starting now: the clock in whole
// seconds, never below the last ts used, nor, on a database with peers, below
// the time other servers moved the service to. Callers run in a group.
func (c *committer) tick() int64 {
	var ts int64
	if t, ok := c.r.databaseTime(); c.dbClock && ok {
		ts = int64(math.Floor(t))
		c.offset.Store(int64((t - float64(c.clock.Now().UnixNano())/1e9) * 1e9))
	} else {
		ts = c.clock.Now().Unix()
	}
	if now, ok := c.r.clock(); ok && c.r.peers != nil && now > ts {
		ts = now
	}
	if last := c.lastTS.Load(); ts < last && !failpoint.Enabled(failpoint.TimeBackwards) {
		ts = last
	}
	c.lastTS.Store(ts)
	return ts
}

// readTS is the ts of a read apart: the clock, never below the last ts the
// committer used. Unlike tick it records nothing, as a read moves no time.
func (c *committer) readTS() int64 {
	ts := c.now().Unix()
	if last := c.lastTS.Load(); ts < last {
		ts = last
	}
	return ts
}

// now is this server's best reading of the time ticks are taken from.
func (c *committer) now() time.Time {
	return c.clock.Now().Add(time.Duration(c.offset.Load()))
}
