package service

import (
	"cmp"
	"slices"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// resolveDeadlocks goes on with D4 for requester r, now queued for lock,
// after the first victims were aborted (aborts explains them), and returns
// r's result (D5).
func resolveDeadlocks(op *Op, r, lock string, victims []string, aborts []lk.Abort) (lk.AcquireResult, error) {
	tx := op.Tx
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
		victim, waitingFor, cycle, why := youngestOnCycle(r, edges)
		if victim == "" {
			break
		}
		if err := abort(op, r, victim, waitingFor, "", cycle, why); err != nil {
			return lk.AcquireResult{}, err
		}
		victims, aborts = append(victims, victim), append(aborts, why)
		if victim == r {
			return lk.AcquireResult{Outcome: lk.Deadlock, Victims: victims, Aborts: aborts}, nil
		}
	}
	// The aborts may have granted r its lock (at ts), or moved it up.
	l, granted, err := repo.LeaseGet(tx, lock, r)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	if granted {
		if err := explainGrants(op); err != nil {
			return lk.AcquireResult{}, err
		}
		return lk.AcquireResult{Outcome: lk.Granted, Token: l.Token, GrantedAt: l.GrantedAt, ExpiresAt: l.ExpiresAt,
			Victims: victims, Aborts: aborts, Predecessors: grantedTo(op, r, lock)}, nil
	}
	rank, err := repo.QueueRank(tx, r)
	if err != nil {
		return lk.AcquireResult{}, err
	}
	wait, err := queuedEstimate(op, r, lock, rank)
	return lk.AcquireResult{Outcome: lk.Queued, Position: rank, Victims: victims, Aborts: aborts, EstimatedWait: wait}, err
}

// youngestOnCycle returns the client of largest age among C (D4.1-2): the
// clients reachable from r that can also reach r, given the edges of a walk
// from r, the lock it waits for, and C itself, by age; and why, the
// victim's explanation (its age, and C oldest first, each with the lock it
// waits for). It returns "" when r is on no cycle.
func youngestOnCycle(r string, edges []repo.WaitEdge) (victim, waitingFor string, cycle []string, why lk.Abort) {
	into := map[string][]string{}
	age := map[string]int64{}
	waiting := map[string]string{}
	for _, e := range edges {
		into[e.To] = append(into[e.To], e.From)
		age[e.To], waiting[e.To] = e.ToAge, e.ToWaiting
	}
	if len(into[r]) == 0 {
		return "", "", nil, lk.Abort{}
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
	why = lk.Abort{Victim: &victim, Age: age[victim], Cycle: make([]lk.CycleMember, len(cycle))}
	for i, c := range cycle {
		why.Cycle[i] = lk.CycleMember{Client: &cycle[i], Age: age[c], WaitsFor: waiting[c]}
	}
	return victim, waiting[victim], cycle, why
}

// abort removes victim, which waits for lock ("" for none), from the system
// (D4.3): its queue entry first, then its leases in ascending lock-name
// order, running S3 after each, with grants starting at op.Now; then it is
// unregistered. The fenced store and the fencing counters are untouched.
// requester is the client whose acquire found the cycle, and cycle is C when
// the victim was chosen, for the event; why explains the choice. asked is
// the mode of a requester that aborts itself: it waits for lock, the lock
// it asked for, in no queue; "" for any other victim.
func abort(op *Op, requester, victim, lock string, asked lk.Mode, cycle []string, why lk.Abort) error {
	tx, ts := op.Tx, op.Now
	entry := repo.QueueEntry{Mode: asked}
	queued := lock != "" && asked == ""
	if queued {
		var err error
		if entry, err = leaveQueue(tx, victim, lock); err != nil {
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
	op.emit(Event{Kind: lk.EventDeadlockAbort, Client: victim, Lock: lock, At: ts, Cycle: cycle,
		Requester: requester, Lost: holds, Position: entry.Position, Mode: entry.Mode, Abort: &why})
	if err := recordAbort(op, requester, lock, why); err != nil {
		return err
	}
	if queued {
		if err := promote(op, lock, ts); err != nil {
			return err
		}
	}
	for _, h := range holds {
		if _, _, _, err := repo.LeaseEnd(tx, h.Lock, victim, lk.EndAborted, ts); err != nil {
			return err
		}
		if err := promote(op, h.Lock, ts); err != nil {
			return err
		}
	}
	op.Unregistered = true
	return repo.ClientDelete(tx, victim)
}
