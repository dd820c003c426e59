package service

import (
	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Acquire asks for lock on behalf of client (L4, L8, S1-S2, D1-D5). It returns
// lk.ErrInvalidTTL for a ttl outside 1..lk.MaxTTL and lk.ErrClientBusy when the
// client waits for a lock or already holds this one. Otherwise the client is
// registered if it was not, and the request is granted on the spot (empty
// queue, compatible holders), or queued and checked for deadlock.
func Acquire(op *Op, req lk.AcquireRequest) (lk.AcquireResult, error) {
	if err := req.Validate(); err != nil {
		return lk.AcquireResult{}, err
	}
	client, lock, ttl, mode := req.Client, req.Lock, req.TTL, req.Mode
	tx, ts := op.Tx, op.Now
	// The state in one query; with it, where that saves a round trip
	// (PostgreSQL), the predecessors an exclusive grant on the spot would
	// have (explain.go).
	var st repo.RequestState
	var next *[]lk.Predecessor
	var err error
	if withNext(op.Config, mode) {
		st, next, err = repo.RequestStateWithNext(tx, client, lock, op.Config.History.keep(), maxPredecessors)
	} else {
		st, err = repo.RequestStateGet(tx, client, lock)
	}
	if err != nil {
		return lk.AcquireResult{}, err
	}
	if st.WaitingFor != "" {
		return lk.AcquireResult{}, lk.Errorf(lk.CodeClientBusy, client+" already waits for "+st.WaitingFor+"; a client waits for one lock at a time")
	}
	if st.HoldsLock {
		return lk.AcquireResult{}, lk.Errorf(lk.CodeClientBusy, client+" already holds "+lock)
	}
	if !st.Registered {
		op.State.LastClientAge++
		if err := repo.ClientRegister(tx, client, op.State.LastClientAge, ts); err != nil {
			return lk.AcquireResult{}, err
		}
	}
	if !st.LockExists || (st.QueueLength == 0 && lk.Compatible(st.HolderMode, mode)) {
		last := st.LastToken
		if !st.LockExists {
			// 0 (L5), but after an accepted rollback: past every token
			// the lost transactions issued, on locks they created too.
			last = op.State.TokenFloor
		}
		l := repo.LeaseRow{Lock: lock, Client: client, Mode: mode, Token: last + 1,
			GrantedAt: ts, ExpiresAt: lk.AddTime(ts, ttl)}
		if failpoint.First(failpoint.ReissueToken, lock) && st.LastToken > 0 {
			l.Token = st.LastToken
		}
		if err := repo.LockGrant(tx, l, !st.LockExists, op.Config.History.keep()); err != nil {
			return lk.AcquireResult{}, err
		}
		op.State.NoteExpiry(l.ExpiresAt)
		if err := explainGrants(op); err != nil { // the hand-overs of Settle's lapses
			return lk.AcquireResult{}, err
		}
		op.emit(Event{Kind: lk.EventGrant, Client: client, Lock: lock, At: ts,
			Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: mode})
		// next was read for the token after the stored counter: a new
		// lock's, whatever its first token, has no ended grant before it.
		if next != nil && l.Token == last+1 {
			op.Events[len(op.Events)-1].Predecessors = nonEmpty(*next)
			op.explained = len(op.Events)
		} else if err := explainGrants(op); err != nil {
			return lk.AcquireResult{}, err
		}
		return lk.AcquireResult{Outcome: lk.Granted, Token: l.Token, GrantedAt: ts, ExpiresAt: l.ExpiresAt,
			Predecessors: op.Events[len(op.Events)-1].Predecessors}, nil
	}
	// D3-D5. A cycle through the requester needs an edge into it (somebody
	// waits for a lock it holds) and a holder of the requested lock that
	// waits itself: everything a waiter on lock reaches, it reaches through
	// the lock's holders. Only then is the graph walked, before the queue
	// entry is written, so that a requester that is itself the victim is
	// never queued. A client registered just now holds nothing.
	victim, victimWaits := "", ""
	var cycle []string
	var why lk.Abort
	// What the way into the queue reads goes in one round trip: the
	// estimate's reads are made before the entry is written, as it leaves
	// them but for its own mode, which is added.
	rank := st.QueueLength + 1
	estimate := op.Config.Explain && rank <= estimateHorizon
	qr, err := repo.ReadForQueueing(tx, client, lock, st.Registered, estimate, estimateHorizon, holdSample)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	if qr.Awaited {
		possible, err := repo.LockHoldersWaiting(tx, lock)
		if err != nil {
			return lk.AcquireResult{}, err
		}
		if possible {
			edges, err := repo.WaitEdgesBeforeQueueing(tx, client, lock)
			if err != nil {
				return lk.AcquireResult{}, err
			}
			victim, victimWaits, cycle, why = youngestOnCycle(client, edges)
			// The requester is not queued yet: it waits for lock.
			for i, m := range why.Cycle {
				if *m.Client == client {
					why.Cycle[i].WaitsFor = lock
				}
			}
		}
	}
	if victim == client {
		if err := abort(op, client, client, lock, mode, cycle, why); err != nil {
			return lk.AcquireResult{}, err
		}
		return lk.AcquireResult{Outcome: lk.Deadlock, Victims: []string{client}, Aborts: []lk.Abort{why}}, nil
	}
	if err := repo.LockEnqueue(tx, lock); err != nil {
		return lk.AcquireResult{}, err
	}
	if err := repo.QueueAppend(tx, repo.QueueEntry{Lock: lock, Position: st.LastPosition + 1, Client: client,
		Mode: mode, TTL: ttl, QueuedAt: ts}); err != nil {
		return lk.AcquireResult{}, err
	}
	op.emit(Event{Kind: lk.EventQueue, Client: client, Lock: lock, At: ts,
		Position: st.LastPosition + 1, Mode: mode})
	res := lk.AcquireResult{Outcome: lk.Queued, Position: rank}
	if victim == "" {
		if estimate {
			if waits := waitsFrom(qr.Holds, qr.Holders, op.Now, append(qr.Modes, mode)); waits != nil {
				res.EstimatedWait = waits[len(waits)-1]
			}
		}
		return res, nil
	}
	if err := abort(op, client, victim, victimWaits, "", cycle, why); err != nil {
		return lk.AcquireResult{}, err
	}
	return resolveDeadlocks(op, client, lock, []string{victim}, []lk.Abort{why})
}

// withNext: an acquire reads the predecessors of a grant on the spot with
// its state where that saves a round trip.
func withNext(cfg *Config, mode lk.Mode) bool { return cfg.Explain && mode == lk.Exclusive }

// AcquireAhead is the first read Acquire makes for req, for the runtime to
// send ahead with its transaction's first round trip (repo.Warm): the
// request's state, read before anything else the operation does.
func AcquireAhead(cfg *Config, req lk.AcquireRequest) repo.Warm {
	if req.Validate() != nil {
		return repo.Warm{} // Acquire refuses it before any read
	}
	return repo.WarmRequestState(req.Client, req.Lock, withNext(cfg, req.Mode), cfg.History.keep(), maxPredecessors)
}
