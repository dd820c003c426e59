package service

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Acquire asks for lock on behalf of client (L4, L8, S1-S2, D1-D5). It returns
// lk.ErrInvalidTTL for a ttl outside 1..lk.MaxTTL and lk.ErrClientBusy when the
// client waits for a lock or already holds this one. Otherwise the client is
// registered if it was not, and the request is granted on the spot (empty
// queue, compatible holders), or queued and checked for deadlock.
func (s *Service) Acquire(ctx context.Context, ts int64, req lk.AcquireRequest) (lk.AcquireResult, error) {
	var res lk.AcquireResult
	client, lock, ttl, mode := req.Client, req.Lock, req.TTL, req.Mode
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		st, err := repo.RequestStateGet(tx, client, lock)
		if err != nil {
			return err
		}
		if st.WaitingFor != "" {
			return lk.Errorf(lk.CodeClientBusy, client+" already waits for "+st.WaitingFor+"; a client waits for one lock at a time")
		}
		if st.HoldsLock {
			return lk.Errorf(lk.CodeClientBusy, client+" already holds "+lock)
		}
		if !st.Registered {
			s.c.LastClientAge++
			if err := repo.ClientRegister(tx, client, s.c.LastClientAge, ts); err != nil {
				return err
			}
		}
		res, err = s.acquire(tx, ts, client, lock, ttl, mode, st)
		return err
	})
	return res, err
}

func (s *Service) acquire(tx *repo.Tx, ts int64, client, lock string, ttl int64, mode lk.Mode, st repo.RequestState) (lk.AcquireResult, error) {
	if !st.LockExists || (st.QueueLength == 0 && lk.Compatible(st.HolderMode, mode)) {
		l := repo.LeaseRow{Lock: lock, Client: client, Mode: mode, Token: st.LastToken + 1,
			GrantedAt: ts, ExpiresAt: lk.AddTime(ts, ttl)}
		if failpoint.First(failpoint.ReissueToken, lock) && st.LastToken > 0 {
			l.Token = st.LastToken
		}
		if err := repo.LockGrant(tx, l, !st.LockExists, s.history.keep()); err != nil {
			return lk.AcquireResult{}, err
		}
		s.noteExpiry(l.ExpiresAt)
		s.events = append(s.events, Event{Kind: EventGranted, Client: client, Lock: lock, At: ts,
			Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: mode})
		if err := s.explainGrants(tx); err != nil {
			return lk.AcquireResult{}, err
		}
		return lk.AcquireResult{Outcome: lk.Granted, Token: l.Token, GrantedAt: ts, ExpiresAt: l.ExpiresAt,
			Predecessors: s.events[len(s.events)-1].Predecessors}, nil
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
	awaited := false
	if st.Registered {
		var err error
		if awaited, err = repo.ClientAwaited(tx, client); err != nil {
			return lk.AcquireResult{}, err
		}
	}
	if awaited {
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
		if err := s.abort(tx, client, client, lock, mode, ts, cycle, why); err != nil {
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
	s.events = append(s.events, Event{Kind: EventQueued, Client: client, Lock: lock, At: ts,
		Position: st.LastPosition + 1, Mode: mode})
	res := lk.AcquireResult{Outcome: lk.Queued, Position: st.QueueLength + 1}
	if victim == "" {
		var err error
		res.EstimatedWait, err = s.queuedEstimate(tx, ts, client, lock)
		return res, err
	}
	if err := s.abort(tx, client, victim, victimWaits, "", ts, cycle, why); err != nil {
		return lk.AcquireResult{}, err
	}
	return s.resolveDeadlocks(tx, ts, client, lock, []string{victim}, []lk.Abort{why})
}
