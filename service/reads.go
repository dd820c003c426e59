package service

import (
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// The answers that change nothing. Each is one function, whether it runs
// as an operation (after Settle, in the writer's transaction) or apart
// (Op.Apart: on a read connection that sees the last commit, with nothing
// retired and the clock not moved). Apart, a lease that ended by op.Now is
// left out, as an operation at op.Now would have retired it; where its
// retirement would also hand a lock over, the read answers ErrNeedsTx
// rather than a state the contract never shows (waiters of a lock with no
// holder). Inspect and Read (store.go) only run as operations.

// Inspect returns lock's holders and queue (S4); a lock nobody has used has
// neither.
func Inspect(op *Op, req lk.InspectRequest) (lk.InspectResult, error) {
	if err := req.Validate(); err != nil {
		return lk.InspectResult{}, err
	}
	var out lk.InspectResult
	var err error
	if req.Limit == 0 {
		out, err = repo.LockView(op.Tx, req.Lock)
	} else {
		inQueue, after, _ := lk.ParseInspectCursor(req.After)
		out, err = repo.LockViewPage(op.Tx, req.Lock, inQueue, after, req.Limit)
	}
	if err != nil {
		return out, err
	}
	return out, explainQueue(op, &out)
}

// Status returns client's age, leases by lock name and the lock it waits for
// (D6); an unregistered client has age 0 and nothing else. With a Limit or
// an After, or apart, the leases are a page of them. Apart, a client
// waiting for a lock one of whose holders' leases ended by op.Now is the
// exception: that lease's retirement may grant it the lock or move it up
// the queue, so the answer is ErrNeedsTx.
func Status(op *Op, req lk.StatusRequest) (lk.StatusResult, error) {
	if err := req.Validate(); err != nil {
		return lk.StatusResult{}, err
	}
	var out lk.StatusResult
	var err error
	if op.Apart || req.Limit != 0 || req.After != "" {
		out, err = statusPage(op.Tx, req, op.Now)
	} else {
		out, err = repo.ClientView(op.Tx, req.Client, !req.WithoutPosition)
	}
	if err != nil {
		return out, err
	}
	return out, explainStatus(op, &out)
}

// statusPage answers status at ts with a page of the client's leases.
func statusPage(tx *repo.Tx, req lk.StatusRequest, ts int64) (lk.StatusResult, error) {
	out := lk.StatusResult{Client: req.Client, Holds: []lk.Holder{}}
	head, err := repo.ClientHeadGet(tx, req.Client, ts)
	if err != nil || head.Age == 0 {
		return out, err // an unregistered client holds and awaits nothing (D1, D4.3)
	}
	if head.Unsettled {
		return out, ErrNeedsTx
	}
	out.Age = head.Age
	var more bool
	if out.Holds, more, err = repo.HoldsPage(tx, req.Client, req.After, req.Limit, ts); err != nil {
		return out, err
	}
	if more {
		out.Next = &out.Holds[len(out.Holds)-1].Lock
	}
	if head.WaitingFor != "" {
		out.Waiting = &lk.WaitingFor{Lock: head.WaitingFor}
		if !req.WithoutPosition {
			out.Waiting.Position, err = repo.QueueRank(tx, req.Client)
		}
	}
	return out, err
}

// Locks lists a page of the locks with live leases or waiters at op.Now, by
// name. Apart, a page with a lock that has waiters and a lease that ended by
// op.Now answers ErrNeedsTx, as for Status: the retirement of that lease
// hands the lock over.
func Locks(op *Op, req lk.LocksRequest) (lk.LocksResult, error) {
	out := lk.LocksResult{Locks: []lk.LockSummary{}}
	if err := req.Validate(); err != nil {
		return out, err
	}
	page, more, unsettled, err := repo.LocksLive(op.Tx, req.Prefix, req.After, req.Limit, op.Now)
	if err != nil {
		return out, err
	}
	if unsettled {
		return out, ErrNeedsTx
	}
	if len(page) > 0 {
		out.Locks = page
	}
	if more {
		out.Next = &page[len(page)-1].Lock
	}
	return out, nil
}

// Gauges are what the metrics read of the database at each scrape.
type Gauges struct {
	Held    int64 // locks with live leases
	Waiting int64 // clients waiting in a queue
	// OldestWait is how long, in whole seconds, the client waiting longest
	// in any queue has waited; 0 when nobody waits.
	OldestWait int64
}

// ReadGauges reads the gauges at op.Now. They count what they read: apart,
// a waiter whose lock a lapse not yet retired would hand over is still
// counted. The counts cost a pass over the live leases and the queue; the
// oldest wait, one index lookup (OldestWait).
func ReadGauges(op *Op) (Gauges, error) {
	var g Gauges
	var err error
	if g.Held, g.Waiting, err = repo.LiveCounts(op.Tx, op.Now); err != nil {
		return g, err
	}
	g.OldestWait, err = OldestWait(op)
	return g, err
}

// OldestWait returns how long, in seconds at op.Now, the client that has
// waited longest in any queue has waited; 0 when nobody waits. It costs one
// index lookup (repo.QueueOldest), however many wait.
func OldestWait(op *Op) (int64, error) {
	queuedAt, found, err := repo.QueueOldest(op.Tx)
	if err != nil || !found {
		return 0, err
	}
	return max(op.Now-queuedAt, 0), nil
}

// Store returns a page of req.Lock's fenced store. The store does not
// change with time, so the last commit is its state at op.Now.
func Store(op *Op, req lk.StoreRequest) (lk.StoreResult, error) {
	if err := req.Validate(); err != nil {
		return lk.StoreResult{}, err
	}
	out := lk.StoreResult{Lock: req.Lock}
	var more bool
	var err error
	out.Highest, out.KeyCount, out.Keys, more, err = repo.StorePage(op.Tx, req.Lock, req.After, req.Limit)
	if err == nil && more {
		out.Next = &out.Keys[len(out.Keys)-1].Key
	}
	return out, err
}

// Graph returns the wait-for graph around req.Lock or req.Client at op.Now.
// Apart, a lock of the graph with waiters and a lease that ended by op.Now
// but is not retired yet answers ErrNeedsTx, as for Locks.
func Graph(op *Op, req lk.GraphRequest) (lk.GraphResult, error) {
	if err := req.Validate(); err != nil {
		return lk.GraphResult{}, err
	}
	out, err := repo.Graph(op.Tx, req.Lock, req.Client, lk.MaxGraphNodes, op.Now)
	if errors.Is(err, repo.ErrGraphUnsettled) {
		err = ErrNeedsTx
	}
	return out, err
}

// WaitState is where a client that was queued for a lock stands now.
type WaitState struct {
	Rank       int64          // its place in that lock's queue (1 = next); 0 when not queued for it
	Hold       *repo.LeaseRow // its lease on the lock, when it holds one
	Registered bool           // false after it was aborted (D4) or before it ever acquired
	// With Config.Explain (explain.go): the predecessors of Hold, the
	// estimated wait at Rank, and the abort that unregistered the client.
	Predecessors  []lk.Predecessor
	EstimatedWait *float64
	Aborted       *lk.Abort
}

// Wait tells how the wait of client for lock came out, or that it goes on:
// for a blocked acquire whose wait ran out, or whose news may have been
// lost (another server's notification). It reads only that client's
// registration, its lease on lock and its queue entry, and runs as an
// operation.
func Wait(op *Op, client, lock string) (WaitState, error) {
	var w WaitState
	tx := op.Tx
	var err error
	if w.Registered, err = repo.ClientRegistered(tx, client); err != nil || !w.Registered {
		if err == nil && op.Config.Explain {
			w.Aborted, err = lastAbort(tx, client)
		}
		return w, err
	}
	l, held, err := repo.LeaseGet(tx, lock, client)
	if err != nil {
		return w, err
	}
	if held {
		w.Hold = &l
		if op.Config.Explain {
			w.Predecessors, err = repo.GrantPredecessors(tx, lock, l.Token, l.GrantedAt, l.Mode, maxPredecessors)
		}
		return w, err
	}
	waitingFor, err := repo.ClientWaitingFor(tx, client)
	if err != nil || waitingFor != lock {
		return w, err
	}
	if w.Rank, err = repo.QueueRank(tx, client); err != nil {
		return w, err
	}
	w.EstimatedWait, err = queuedEstimate(op, client, lock, w.Rank)
	return w, err
}
