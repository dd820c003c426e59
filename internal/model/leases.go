package model

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// lockFor returns the lock named name, creating it on first use.
func (m *Model) lockFor(name string) *lock {
	l := m.locks[name]
	if l == nil {
		l = &lock{name: name}
		m.locks[name] = l
	}
	return l
}

// register gives a client its age (D1): the next registration number, larger
// than every age handed out before, also after an abort unregistered it.
func (m *Model) register(name string) *client {
	m.lastAge++
	c := &client{age: m.lastAge, holds: map[string]*lease{}}
	m.clients[name] = c
	return c
}

// compatible is S1: a request is compatible if the lock has no holders, or the
// request and all holders are shared.
func compatible(l *lock, mode string) bool {
	if len(l.holders) == 0 {
		return true
	}
	if mode != modeShared {
		return false
	}
	for _, h := range l.holders {
		if h.mode != modeShared {
			return false
		}
	}
	return true
}

// grant gives clientName a new lease on l starting at start (L2), with the
// lock's next fencing token (L5, S4).
func (m *Model) grant(l *lock, clientName, mode string, ttl, start int64) *lease {
	l.counter++
	le := &lease{lock: l, client: clientName, mode: mode, token: l.counter, expiresAt: expiry(start, ttl)}
	if m.history != nil {
		le.grant = &Grant{Lock: l.name, Token: le.token, Client: clientName, Mode: mode, GrantedAt: start, lease: le}
		m.history = append(m.history, le.grant)
	}
	l.holders = append(l.holders, le)
	m.held[l] = true
	m.clients[clientName].holds[l.name] = le
	m.nextExpiry = min(m.nextExpiry, le.expiresAt)
	return le
}

// removeLease ends a lease (release, lapse or abort: how) at instant at.
// The caller runs S3.
func (m *Model) removeLease(le *lease, how string, at int64) {
	if le.grant != nil {
		le.grant.Ended, le.grant.EndedAt = how, at
	}
	l := le.lock
	i := slices.Index(l.holders, le)
	l.holders = slices.Delete(l.holders, i, i+1)
	if len(l.holders) == 0 {
		delete(m.held, l)
	}
	delete(m.clients[le.client].holds, l.name)
}

// enqueue appends a request to the end of l's queue (L4).
func (m *Model) enqueue(l *lock, clientName, mode string, ttl int64) {
	m.lastSeq++
	w := &waiter{lock: l, client: clientName, mode: mode, ttl: ttl, seq: m.lastSeq}
	l.queue = append(l.queue, w)
	m.clients[clientName].waiting = w
}

// queueIndex is w's index in its lock's queue (its position minus one).
func queueIndex(w *waiter) int {
	q := w.lock.queue
	return sort.Search(len(q), func(i int) bool { return q[i].seq >= w.seq })
}

// removeWaiter takes c's entry out of the queue it waits in; those behind move
// up. The caller runs S3.
func (m *Model) removeWaiter(c *client) {
	w := c.waiting
	i := queueIndex(w)
	w.lock.queue = slices.Delete(w.lock.queue, i, i+1)
	c.waiting = nil
}

// grantQueue is S3: while the queue head is compatible with the current
// holders, grant it and look at the next; stop at the first incompatible one.
// at is the hand-over instant (L3): when the previous lease ended, the release's
// ts, or the acquire's ts for aborts (D4.3).
func (m *Model) grantQueue(l *lock, at int64) {
	for len(l.queue) > 0 && compatible(l, l.queue[0].mode) {
		w := l.queue[0]
		l.queue = slices.Delete(l.queue, 0, 1)
		m.clients[w.client].waiting = nil
		m.grant(l, w.client, w.mode, w.ttl, at)
	}
}

// lapseOrder is the order lapses are processed in (L3, contract-notes): by
// expires_at, then lock name, then token.
func lapseOrder(a, b *lease) int {
	return cmp.Or(
		cmp.Compare(a.expiresAt, b.expiresAt),
		cmp.Compare(a.lock.name, b.lock.name),
		cmp.Compare(a.token, b.token),
	)
}

// advance is validation step 5 and L1: time moves to ts and every lease with
// expires_at <= ts is retired, in the order the lapses happened across all
// locks (L3). Each lapse hands the lock over at the lapsed lease's expires_at
// (S3); a lease so granted that has itself lapsed by ts is retired in turn at
// its own expires_at, and so on.
func (m *Model) advance(ts int64) {
	m.clockSet = true
	m.now = ts
	if ts < m.nextExpiry {
		return // no live lease can have expires_at <= ts
	}

	var due []*lease
	m.nextExpiry = math.MaxInt64
	for l := range m.held {
		for _, h := range l.holders {
			if h.expiresAt <= ts {
				due = append(due, h)
			} else {
				m.nextExpiry = min(m.nextExpiry, h.expiresAt)
			}
		}
	}
	slices.SortFunc(due, lapseOrder)

	// Retiring a lease only removes that lease and S3 only adds leases, so the
	// pending list stays valid; new leases that are already due go in at their
	// place, which is never before the one just processed (their expires_at
	// is later, or equal with a higher token on the same lock).
	for len(due) > 0 {
		le := due[0]
		due = due[1:]
		l := le.lock
		m.removeLease(le, endLapsed, le.expiresAt)
		issued := l.counter
		m.grantQueue(l, le.expiresAt)
		for _, h := range l.holders {
			if h.token > issued && h.expiresAt <= ts {
				i, _ := slices.BinarySearchFunc(due, h, lapseOrder)
				due = slices.Insert(due, i, h)
			}
		}
	}
}
