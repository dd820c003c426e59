package service

import (
	"cmp"
	"slices"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// resolveDeadlocks goes on with D4 for requester r, now queued for lock,
// after the first victims were aborted, and returns r's result (D5).
func (s *Service) resolveDeadlocks(tx *repo.Tx, ts int64, r, lock string, victims []string) (lk.AcquireResult, error) {
	for {
		// The aborts may have removed every edge into r, or granted it.
		awaited, err := repo.ClientAwaited(tx, r)
		if err != nil {
			return lk.AcquireResult{}, err
		}
		if !awaited {
			break
		}
		if possible, err := repo.LockHoldersWaiting(tx, lock); err != nil || !possible {
			if err != nil {
				return lk.AcquireResult{}, err
			}
			break
		}
		edges, err := repo.WaitEdgesFrom(tx, r)
		if err != nil {
			return lk.AcquireResult{}, err
		}
		victim, waitingFor, cycle := youngestOnCycle(r, edges)
		if victim == "" {
			break
		}
		if err := s.abort(tx, r, victim, waitingFor, ts, cycle); err != nil {
			return lk.AcquireResult{}, err
		}
		victims = append(victims, victim)
		if victim == r {
			return lk.AcquireResult{Outcome: lk.Deadlock, Victims: victims}, nil
		}
	}
	// The aborts may have granted r its lock (at ts), or moved it up.
	l, granted, err := repo.LeaseGet(tx, lock, r)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	if granted {
		return lk.AcquireResult{Outcome: lk.Granted, Token: l.Token, GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt, Victims: victims}, nil
	}
	rank, err := repo.QueueRank(tx, r)
	return lk.AcquireResult{Outcome: lk.Queued, Position: rank, Victims: victims}, err
}

// youngestOnCycle returns the client of largest age among C (D4.1-2): the
// clients reachable from r that can also reach r, given the edges of a walk
// from r, the lock it waits for, and C itself, by age. It returns "" when r is
// on no cycle.
func youngestOnCycle(r string, edges []repo.WaitEdge) (victim, waitingFor string, cycle []string) {
	into := map[string][]string{}
	age := map[string]int64{}
	waiting := map[string]string{}
	for _, e := range edges {
		into[e.To] = append(into[e.To], e.From)
		age[e.To], waiting[e.To] = e.ToAge, e.ToWaiting
	}
	if len(into[r]) == 0 {
		return "", "", nil
	}
	// Every edge starts at a client the walk reached from r, so the clients
	// found backwards from r are exactly C.
	seen := map[string]bool{r: true}
	stack := []string{r}
	victim = r
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if age[n] > age[victim] {
			victim = n
		}
		for _, m := range into[n] {
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
	}
	for n := range seen {
		cycle = append(cycle, n)
	}
	slices.SortFunc(cycle, func(a, b string) int { return cmp.Compare(age[a], age[b]) })
	return victim, waiting[victim], cycle
}

// abort removes victim, which waits for lock ("" for none), from the system
// (D4.3): its queue entry first, then its leases in ascending lock-name
// order, running S3 after each, with grants starting at ts; then it is
// unregistered. The fenced store and the fencing counters are untouched.
// requester is the client whose acquire found the cycle, and cycle is C when
// the victim was chosen, for the event.
func (s *Service) abort(tx *repo.Tx, requester, victim, lock string, ts int64, cycle []string) error {
	var entry repo.QueueEntry
	if lock != "" {
		var err error
		if entry, _, err = repo.QueueTakeClient(tx, victim); err != nil {
			return err
		}
		if err := repo.LockDequeue(tx, lock); err != nil {
			return err
		}
	}
	holds, err := repo.LeasesOfClient(tx, victim)
	if err != nil {
		return err
	}
	// The event, naming all the victim lost, comes before the grants that
	// follow from it: read in order, the events never show a lock granted
	// while the victim still holds it.
	s.events = append(s.events, Event{Kind: EventAborted, Client: victim, Lock: lock, At: ts, Cycle: cycle,
		Requester: requester, Lost: holds, Position: entry.Position, Mode: entry.Mode})
	if lock != "" {
		if err := s.promote(tx, lock, ts); err != nil {
			return err
		}
	}
	for _, h := range holds {
		if _, _, err := repo.LeaseEnd(tx, h.Lock, victim, lk.EndAborted, ts); err != nil {
			return err
		}
		if err := s.promote(tx, h.Lock, ts); err != nil {
			return err
		}
	}
	s.unregister = true
	return repo.ClientDelete(tx, victim)
}
