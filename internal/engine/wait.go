package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/service"
)

// Blocked acquires: an acquire with a wait that was queued subscribes to
// its client's events on its lock before it runs, and is answered when one
// of them settles its wait (a grant from the queue, an abort, a
// withdrawal), when the wait runs out, or when the engine drains. Events
// come from this server's commits and, on PostgreSQL, from the other
// servers' notifications; when some may have been dropped or lost, the
// wait reads its state instead.

// waits are the subscriptions of the blocked acquires, by client.
type waits struct {
	mu   sync.Mutex
	subs map[string][]*subscription
}

// subscription is a blocked acquire's news: the events of its client on its
// lock, and missed, which says that some were dropped or may have been
// lost (another server's, a failed group) and the state must be read.
type subscription struct {
	lock   string
	events chan service.Event
	missed chan struct{}
}

func (sub *subscription) miss() {
	select {
	case sub.missed <- struct{}{}:
	default: // already pending
	}
}

// subscribe registers a blocked acquire of client for lock; the returned
// function unregisters it.
func (w *waits) subscribe(client, lock string) (*subscription, func()) {
	// Room for a wait's few events and some of an earlier wait's.
	sub := &subscription{lock: lock, events: make(chan service.Event, 16), missed: make(chan struct{}, 1)}
	w.mu.Lock()
	w.subs[client] = append(w.subs[client], sub)
	w.mu.Unlock()
	return sub, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.subs[client]
		for i, c := range list {
			if c == sub {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(w.subs, client)
		} else {
			w.subs[client] = list
		}
	}
}

// wake hands events to the blocked acquires of their clients, each only
// the events of the lock it waits for: a client that holds many locks has
// renewals and lapses of the others, which would fill its channel.
func (w *waits) wake(events []service.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range events {
		if e.Kind == lk.EventGrant && failpoint.Enabled(failpoint.DropWakeup) {
			continue // the fault: the grant's waiter is not told
		}
		for _, sub := range w.subs[e.Client] {
			if e.Lock != sub.lock {
				continue
			}
			select {
			case sub.events <- e:
			default:
				sub.miss() // dropped: the wait reads the state instead
			}
		}
	}
}

// recheck tells every blocked acquire to read its state.
func (w *waits) recheck() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, list := range w.subs {
		for _, sub := range list {
			sub.miss()
		}
	}
}

// await blocks until client, queued for lock, is granted it, aborted or
// withdrawn, or the wait runs out, and returns the answer.
func await(e *Engine, ctx context.Context, client, lock string, wait time.Duration, news *subscription, queued lk.AcquireResult) (lk.AcquireResult, error) {
	granted := func(token, grantedAt, expiresAt int64, predecessors []lk.Predecessor) lk.AcquireResult {
		return lk.AcquireResult{Outcome: lk.Granted, Token: token, GrantedAt: grantedAt, ExpiresAt: expiresAt,
			Victims: queued.Victims, Aborts: queued.Aborts, Predecessors: predecessors}
	}
	aborted := func(why *lk.Abort) lk.AcquireResult {
		res := lk.AcquireResult{Outcome: lk.Deadlock, Victims: []string{client}}
		if why != nil {
			res.Aborts = []lk.Abort{*why}
		}
		return res
	}
	withdrawn := lk.AcquireResult{Outcome: lk.Withdrawn}
	// decide turns an event into the answer, or reports that it is not one.
	// The events of this wait are those of its queue entry: pos, learnt
	// from the queue event of the acquire, which reaches the channel before
	// the acquire is answered. Events of an earlier wait of the same client
	// may still be on their way (from another server, or from a group that
	// committed just before this acquire's) and carry another position.
	var pos int64
	decide := func(ev service.Event) (lk.AcquireResult, bool) {
		if ev.Lock != lock {
			return lk.AcquireResult{}, false
		}
		if ev.Kind == lk.EventQueue {
			pos = ev.Position
			return lk.AcquireResult{}, false
		}
		if pos == 0 || ev.Position != pos {
			return lk.AcquireResult{}, false
		}
		switch {
		case ev.Kind == lk.EventGrant && ev.FromQueue:
			return granted(ev.Token, ev.At, ev.ExpiresAt, predecessors(e, ctx, ev)), true
		case ev.Kind == lk.EventDeadlockAbort:
			why := ev.Abort
			if why == nil || ev.Truncated { // another server's, without all of it
				why, _ = query(e, ctx, "last-abort", client, service.LastAbort)
			}
			return aborted(why), true
		case ev.Kind == lk.EventWithdraw:
			return withdrawn, true
		}
		return lk.AcquireResult{}, false
	}
	timeout := e.com.clock.After(wait)
	var retry <-chan time.Time // a recheck that failed, to try again
	stopping := false          // the engine drains: the answer says so
	for {
		var final bool // answer now, queued or not
		select {
		case ev := <-news.events:
			if res, ok := decide(ev); ok {
				return res, nil
			}
			continue
		case <-news.missed:
		case <-retry:
			retry = nil
		case <-timeout:
			final = true
		case <-e.draining:
			final, stopping = true, true // shutting down: answer with the state as it is
		case <-ctx.Done():
			return lk.AcquireResult{}, ctx.Err()
		}
		// Read the state: the wait ran out, or (missed) news was dropped
		// or may have been lost. The committer hands a group's events
		// over before it answers the group's calls, so once this one is
		// answered the channel has everything this server decided so far.
		st, err := call(e, ctx, "wait-state", lock, func(op *service.Op, lock string) (service.WaitState, error) {
			return service.Wait(op, client, lock)
		})
		if err != nil && !final && errors.Is(err, lk.ErrUnavailable) {
			// The database is away for the moment (the recheck is likely
			// the listener's, after it lost its connection): the client
			// is still queued, so keep waiting rather than answer 503.
			retry = time.After(250 * time.Millisecond)
			continue
		}
		if err != nil {
			return lk.AcquireResult{}, err
		}
		for drained := false; !drained; {
			select {
			case ev := <-news.events:
				if res, ok := decide(ev); ok {
					return res, nil
				}
			default:
				drained = true
			}
		}
		switch {
		case st.Rank > 0 && final:
			res := lk.AcquireResult{Outcome: lk.Queued, Position: st.Rank, Victims: queued.Victims, Aborts: queued.Aborts,
				EstimatedWait: st.EstimatedWait}
			if stopping {
				// Cut short, not run out: the client is still queued, and
				// may wait on elsewhere.
				res.Reason = lk.ReasonServerStopping
			}
			return res, nil
		case st.Rank > 0:
			// still waiting
		case st.Hold != nil:
			return granted(st.Hold.Token, st.Hold.GrantedAt, st.Hold.ExpiresAt, st.Predecessors), nil
		case !st.Registered:
			return aborted(st.Aborted), nil
		default:
			return withdrawn, nil
		}
	}
}

// predecessors returns those of the grant ev reports. Another server's
// notification may not carry them, or only some (Truncated; nor does a
// grant without any): they are read then, from the grant history, which
// the grant's commit holds. A failed read leaves them out rather than fail
// a granted acquire.
func predecessors(e *Engine, ctx context.Context, ev service.Event) []lk.Predecessor {
	if ev.Predecessors != nil && !ev.Truncated || !e.r.cfg.Explain {
		return ev.Predecessors
	}
	ps, _ := query(e, ctx, "predecessors", ev, func(op *service.Op, ev service.Event) ([]lk.Predecessor, error) {
		return service.Predecessors(op, ev.Lock, ev.Token)
	})
	return ps
}
