package model

import "sort"

// resolveDeadlocks is D4 for the requester r just queued at ts: while r lies on
// a wait cycle, abort the youngest client among those on cycles through r,
// recomputing after every abort; stop when there is no cycle or r itself was
// aborted. It returns the victims in abort order (D5), never nil.
func (m *Model) resolveDeadlocks(r string, ts int64) []any {
	victims := []any{}
	for {
		cycle := m.cycleMembers(r) // D4.1
		if len(cycle) == 0 {
			return victims
		}
		victim := ""
		for name := range cycle { // D4.2: the largest age is the youngest
			if victim == "" || m.clients[name].age > m.clients[victim].age {
				victim = name
			}
		}
		m.abort(victim, ts) // D4.3
		m.aborted++
		victims = append(victims, victim)
		if victim == r { // D4.4
			return victims
		}
	}
}

// abort is D4.3: withdraw the victim's queue entry (then S3), release its locks
// in ascending byte-wise lock-name order (S3 after each), grants starting at
// the acquire's ts, and unregister it. Store and fencing counters are kept.
func (m *Model) abort(name string, ts int64) {
	c := m.clients[name]
	if c.waiting != nil {
		l := c.waiting.lock
		m.removeWaiter(c)
		m.grantQueue(l, ts)
	}
	locks := make([]string, 0, len(c.holds))
	for lockName := range c.holds {
		locks = append(locks, lockName)
	}
	sort.Strings(locks)
	for _, lockName := range locks {
		le := c.holds[lockName]
		m.removeLease(le, endAborted, ts)
		m.grantQueue(le.lock, ts)
	}
	delete(m.clients, name)
}

// The wait-for graph of D2: a client waiting for lock L at queue index p has an
// edge to every holder of L and to every client at an index below p; a client
// that is not waiting has no edges. Reversed, the clients pointing at x are
// every waiter on a lock x holds and every waiter behind x in its own queue.
//
// The searches below follow exactly these edges without materialising them:
// the "ahead of" targets of the waiters on a lock form a prefix of its queue
// and the reversed ones a suffix, so each search remembers per lock how much
// of the queue it has already taken in, instead of walking every pair of
// waiters.

// cycleMembers is D4.1: the set C of clients reachable from r (by a path of at
// least one edge) that can also reach r. It is empty exactly when r is on no
// cycle.
func (m *Model) cycleMembers(r string) map[string]bool {
	if !m.pointedAt(r) {
		return nil // nothing can lead back to r
	}
	from := m.reachableFrom(r)
	if !from[r] {
		return nil
	}
	// Every client on a path from a member of from to r is itself reachable
	// from r, so the reverse search may stay inside from.
	return m.reaching(r, from)
}

// pointedAt reports whether some edge leads into x.
func (m *Model) pointedAt(x string) bool {
	c := m.clients[x]
	for _, le := range c.holds {
		if len(le.lock.queue) > 0 {
			return true
		}
	}
	return c.waiting != nil && queueIndex(c.waiting) < len(c.waiting.lock.queue)-1
}

// reachableFrom returns the clients reachable from r by one or more edges.
func (m *Model) reachableFrom(r string) map[string]bool {
	reached := map[string]bool{}
	expanded := map[string]bool{}
	stack := []string{r}
	holdersTaken := map[*lock]bool{}
	prefixTaken := map[*lock]int{} // queue[:n] already pushed
	push := func(name string) {
		if !reached[name] {
			reached[name] = true
			stack = append(stack, name)
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if expanded[x] {
			continue
		}
		expanded[x] = true
		w := m.clients[x].waiting
		if w == nil {
			continue
		}
		l := w.lock
		if !holdersTaken[l] {
			holdersTaken[l] = true
			for _, h := range l.holders {
				push(h.client)
			}
		}
		p := queueIndex(w)
		for j := prefixTaken[l]; j < p; j++ {
			push(l.queue[j].client)
		}
		prefixTaken[l] = max(prefixTaken[l], p)
	}
	return reached
}

// reaching returns the members of within that reach r by one or more edges
// through members of within.
func (m *Model) reaching(r string, within map[string]bool) map[string]bool {
	reached := map[string]bool{}
	expanded := map[string]bool{}
	stack := []string{r}
	suffixTaken := map[*lock]int{} // queue[n:] already pushed; absent: none
	takeSuffix := func(l *lock, start int) {
		end, ok := suffixTaken[l]
		if !ok {
			end = len(l.queue)
		}
		for j := start; j < end; j++ {
			name := l.queue[j].client
			if within[name] && !reached[name] {
				reached[name] = true
				stack = append(stack, name)
			}
		}
		if start < end {
			suffixTaken[l] = start
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if expanded[x] {
			continue
		}
		expanded[x] = true
		c := m.clients[x]
		for _, le := range c.holds {
			takeSuffix(le.lock, 0)
		}
		if c.waiting != nil {
			takeSuffix(c.waiting.lock, queueIndex(c.waiting)+1)
		}
	}
	return reached
}
