package repo

// The predecessors of an exclusive grant, known without a read. Every
// grant that explains itself (docs/api.md, "Answers that say why") names
// the leases of its lock that ended while the token before it was the
// lock's last: the rows of grants_ended with that ended_after_token. On
// SQLite the server's one writer records every end, and issues every
// token, itself: it can keep, per lock, the ends recorded since the
// lock's last token was issued, and since the one before it, and name an
// exclusive grant's predecessors from them instead of reading the index
// grants_ended_by_lock_order, a tenth of the committer's time per pair
// at 64 clients (docs/performance.md, "SQLite: an exclusive grant's
// predecessors without a read").
//
// What is kept must be what the read would return, or the explanation
// would be wrong. So the writer keeps a lock's ends only from the moment
// it saw one of its tokens issued, names the predecessors of a token only
// when it also saw the token before it issued, and forgets:
//
//   - a lock, when an end is recorded that it cannot place (a lapse found
//     during a hand-over, GrantInsertLapsed, which today the next forget
//     always follows);
//   - every lock, when leases lapse (their ends are recorded by one
//     statement, GrantsLapse, after the hand-overs they caused, under
//     tokens issued before those), when rows are pruned by age, when the
//     counters are raised after a rollback, and whenever a transaction
//     rolls back or its commit fails (an operation has no savepoint: a
//     failed one fails its transaction).
//
// Pruning a lock's old tokens (GrantsPruneLock) drops the ends it deletes.
// A PostgreSQL database has none of this: other servers write it too. A
// read connection has none either.
//
// The writer also keeps a lock's last ends in the order of GrantHoldTimes:
// the hold times a waiter's estimated wait averages, which every acquire
// on its way into a queue read through two indexes, up to 40 rows, some
// 4 % of the server's CPU per pair on a hot lock (docs/performance.md,
// "SQLite: a waiter's estimate without a read"). They are known from a
// read of them onwards, and an end is placed among them only when the
// lock's last token, its ended_after_token, is known; else they are
// forgotten, as they are with the lock, and when a prune of the lock's
// tokens deletes one of them (rows the list left out could then belong
// in it).
//
// Every source of a row of grants_ended and every change of a lock's
// counter is in this package (grants.go, locks.go, queue.go,
// rollback.go); each tells the writer's endsCache. TestEndsCacheMatchesReads
// compares every answer it gives with the read under random operations.

import (
	"cmp"
	"slices"

	lk "github.com/leasekeeper/leasekeeper"
)

// endsKept bounds the ends kept for one token of a lock: as many as an
// explanation names (service's maxPredecessors).
const endsKept = 100

// holdsKept bounds the hold times kept for a lock: as many as the wait
// estimate averages (service's holdSample).
const holdsKept = 20

// endsLocks bounds the locks kept: past it, a lock whose token is issued,
// or whose hold times are read, takes the place of another, which is then
// read again. With endsKept and holdsKept, it bounds the memory at some
// 20 MB, reached only by crowds of over a hundred readers on each of a
// thousand locks.
const endsLocks = 1 << 10

// endsCache is a SQLite writer's knowledge of the ends of its locks; nil
// where there is none, and then every method does nothing.
type endsCache struct {
	locks map[string]*lockEnds
}

// lockEnds is one lock's: the ends recorded while last was its last
// token, and those recorded while prevLast was (prev, known only when the
// writer saw both tokens issued in turn).
type lockEnds struct {
	last     int64
	cur      endList
	prevLast int64
	prev     endList
	holds    holdList
}

// holdList is a lock's last ends, latest first in GrantHoldTimes' order
// (ended_after_token, ended_at, token), at most holdsKept of them; when
// known, every one the database holds up to that number.
type holdList struct {
	hs    []holdEnd
	known bool
}

// endList is the ends of one token, first ended first (by ended_at, then
// token, as the read orders them), at most endsKept of them. known is
// false when some may be missing.
type endList struct {
	ps    []lk.Predecessor
	full  bool // more ended than ps holds; those after it were dropped
	known bool
}

// verifyEnds, set by tests only, gets each answer predecessors gave with
// the read's, which GrantPredecessors then returns.
var verifyEnds func(lock string, token int64, kept, read []lk.Predecessor)

// verifyHolds, set by tests only, gets each answer holdTimes gave with the
// read's, which is then used.
var verifyHolds func(lock string, kept, read []holdEnd)

func newEndsCache() *endsCache { return &endsCache{locks: map[string]*lockEnds{}} }

// reset forgets every lock.
func (c *endsCache) reset() {
	if c != nil {
		clear(c.locks)
	}
}

// entry returns lock's, made when missing (in place of another past
// endsLocks).
func (c *endsCache) entry(lock string) *lockEnds {
	e := c.locks[lock]
	if e == nil {
		if len(c.locks) >= endsLocks {
			for k := range c.locks {
				delete(c.locks, k)
				break
			}
		}
		e = &lockEnds{}
		c.locks[lock] = e
	}
	return e
}

// issued records that lock's counter moved on by n to last.
func (c *endsCache) issued(lock string, last, n int64) {
	if c == nil {
		return
	}
	e := c.entry(lock)
	if e.cur.known && e.last == last-n {
		e.prevLast, e.prev = e.last, e.cur
		e.last, e.cur = last, endList{known: true}
		return
	}
	// Never seen, or not in turn: no end can have been recorded for last
	// yet, but those of the token before it are not known.
	e.last, e.cur = last, endList{known: true}
	e.prevLast, e.prev = 0, endList{}
}

// ended records the end of lease l (how, at), written with its lock's last
// token as its ended_after_token. The predecessor is made only for a lock
// kept: on PostgreSQL, and for the locks not kept, an end costs nothing.
func (c *endsCache) ended(l LeaseRow, how lk.Ending, at int64) {
	if c == nil {
		return
	}
	e := c.locks[l.Lock]
	if e == nil {
		return
	}
	if e.cur.known {
		client := l.Client
		e.cur.add(lk.Predecessor{Client: &client, Token: l.Token, Mode: l.Mode, Ended: how, EndedAt: at})
	}
	if e.holds.known {
		if !e.cur.known {
			e.holds = holdList{} // its ended_after_token is not known
			return
		}
		e.holds.add(holdEnd{HoldTime{l.Mode, at - l.GrantedAt}, e.last, at, l.Token})
	}
}

// forget drops lock: an end was recorded that it cannot place.
func (c *endsCache) forget(lock string) {
	if c != nil {
		delete(c.locks, lock)
	}
}

// pruned drops lock's ends of tokens up to through (GrantsPruneLock).
func (c *endsCache) pruned(lock string, through int64) {
	if c == nil {
		return
	}
	if e := c.locks[lock]; e != nil {
		e.cur.prune(through)
		e.prev.prune(through)
		if slices.ContainsFunc(e.holds.hs, func(h holdEnd) bool { return h.token <= through }) {
			e.holds = holdList{}
		}
	}
}

// holdTimes returns, when it knows them, lock's last limit ends in
// GrantHoldTimes' order: its rows.
func (c *endsCache) holdTimes(lock string, limit int) ([]holdEnd, bool) {
	if c == nil || limit < 0 || limit > holdsKept {
		return nil, false // a negative limit is no limit to SQLite
	}
	e := c.locks[lock]
	if e == nil || !e.holds.known {
		return nil, false
	}
	return slices.Clone(e.holds.hs[:min(limit, len(e.holds.hs))]), true
}

// readHolds starts lock's hold times from GrantHoldTimes' rows, read with
// limit: all of its last holdsKept ends, unless limit left some out.
func (c *endsCache) readHolds(lock string, limit int, read []holdEnd) {
	if c == nil || (limit < holdsKept && len(read) == limit) {
		return
	}
	e := c.entry(lock)
	e.holds = holdList{hs: slices.Clone(read[:min(len(read), holdsKept)]), known: true}
}

// predecessors returns, when it knows them, the first limit ends of lock
// recorded while after was its last token: GrantsEndedAfter's rows.
func (c *endsCache) predecessors(lock string, after int64, limit int) ([]lk.Predecessor, bool) {
	if c == nil {
		return nil, false
	}
	e := c.locks[lock]
	if e == nil {
		return nil, false
	}
	var l *endList
	switch {
	case e.prev.known && e.prevLast == after:
		l = &e.prev
	case e.cur.known && e.last == after:
		l = &e.cur
	default:
		return nil, false
	}
	if l.full && limit > len(l.ps) {
		return nil, false
	}
	n := min(limit, len(l.ps))
	if n == 0 {
		return nil, true // as the read returns none
	}
	return slices.Clone(l.ps[:n]), true
}

// add places h among the ends kept, dropping the oldest past holdsKept.
func (l *holdList) add(h holdEnd) {
	i, _ := slices.BinarySearchFunc(l.hs, h, func(a, b holdEnd) int {
		return cmp.Or(cmp.Compare(b.after, a.after), cmp.Compare(b.endedAt, a.endedAt), cmp.Compare(b.token, a.token))
	})
	if i == holdsKept {
		return
	}
	l.hs = slices.Insert(l.hs, i, h)
	if len(l.hs) > holdsKept {
		l.hs = l.hs[:holdsKept]
	}
}

func (l *endList) add(p lk.Predecessor) {
	i, _ := slices.BinarySearchFunc(l.ps, p, func(a, b lk.Predecessor) int {
		if a.EndedAt != b.EndedAt {
			return cmp.Compare(a.EndedAt, b.EndedAt)
		}
		return cmp.Compare(a.Token, b.Token)
	})
	if i == endsKept {
		l.full = true
		return
	}
	l.ps = slices.Insert(l.ps, i, p)
	if len(l.ps) > endsKept {
		l.ps, l.full = l.ps[:endsKept], true
	}
}

// prune drops the ends of tokens up to through. Where some were dropped
// for want of room, an end added later could be placed before one of them
// that the database still holds: the list is no longer known. (Today a
// prune follows the issue of a token, and meets only lists that take no
// more ends, whose survivors predecessors answers only as many as it holds:
// this guards the order should that change.)
func (l *endList) prune(through int64) {
	n := len(l.ps)
	l.ps = slices.DeleteFunc(l.ps, func(p lk.Predecessor) bool { return p.Token <= through })
	if l.full && len(l.ps) < n {
		*l = endList{}
	}
}
