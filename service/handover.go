package service

import (
	"container/heap"
	"math"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// promote runs S3 on lock at instant at, after the caller removed a holder or
// a waiter of it (release, withdrawal, abort). Its grants start at `at`.
func promote(op *Op, lock string, at int64) error {
	h := newHandOver(op, lock, math.MinInt64)
	if err := h.grantHeads(at); err != nil {
		return err
	}
	return h.apply()
}

// handOver settles one lock within one operation: lapses of its leases in
// time order, and after each, grants to the head of its queue while the head
// is compatible with the holders (S3), each lease starting at that instant
// (L3) and taking the next token (S4). It reads only what it needs: the
// lapsing leases it is given, whether other holders stay (one lookup), and
// the queue from its head, a page at a time.
type handOver struct {
	op   *Op
	tx   *repo.Tx
	lock string
	// lapseBy: a lease granted here that ends by then lapses in this same
	// operation (retire's now); math.MinInt64 outside retire.
	lapseBy int64
	// pending: the lock's leases that end by lapseBy, soonest first.
	pending lapseHeap
	// exclusive and shared count the holders in pending and the live grants.
	exclusive, shared int
	// staying: the mode of the lock's stored holders that outlast lapseBy,
	// "" when there are none; read with the first queue page.
	staying lk.Mode

	queue     []repo.QueueHead // loaded part of the queue, from its head
	next      int              // queue[next] is the current head
	queueDone bool             // nothing beyond the loaded part
	lastToken int64            // the lock's counter, valid once a page was loaded
	// nextPredecessors, read with the first page, are those of an
	// exclusive grant of nextToken (0: not read).
	nextPredecessors []lk.Predecessor
	nextToken        int64

	granted      int64           // waiters granted here
	lastPosition int64           // the last granted waiter's queue position
	survivors    []repo.LeaseRow // grants still live after this operation
	lapsedHere   []repo.LeaseRow // grants made and lapsed in this operation: history rows only
}

func newHandOver(op *Op, lock string, lapseBy int64) *handOver {
	return &handOver{op: op, tx: op.Tx, lock: lock, lapseBy: lapseBy}
}

func (h *handOver) count(m lk.Mode, d int) {
	if m == lk.Exclusive {
		h.exclusive += d
	} else {
		h.shared += d
	}
}

// run retires the pending leases in time order, granting after each.
func (h *handOver) run() error {
	for h.pending.Len() > 0 {
		l := heap.Pop(&h.pending).(repo.LeaseRow)
		h.count(l.Mode, -1)
		h.op.emit(Event{Kind: lk.EventLapse, Client: l.Client, Lock: l.Lock,
			At: l.ExpiresAt, Token: l.Token, ExpiresAt: l.ExpiresAt, Mode: l.Mode})
		at := l.ExpiresAt
		if failpoint.Enabled(failpoint.GrantEarly) {
			at-- // the fault: the successor's lease starts before this one ended
		}
		if err := h.grantHeads(at); err != nil {
			return err
		}
	}
	return h.apply()
}

// grantHeads is S3 at instant at.
func (h *handOver) grantHeads(at int64) error {
	for {
		head, ok, err := h.head()
		if err != nil || !ok {
			return err
		}
		if !h.compatible(head.Mode) {
			return nil
		}
		h.next++
		h.lastToken++
		h.granted++
		h.lastPosition = head.Position
		l := repo.LeaseRow{Lock: h.lock, Client: head.Client, Mode: head.Mode, Token: h.lastToken,
			GrantedAt: at, ExpiresAt: lk.AddTime(at, head.TTL)}
		h.count(l.Mode, +1)
		if l.Mode == lk.Exclusive && l.Token == h.nextToken {
			// Read with the page just now: nothing ended since.
			h.op.foreseen = append(h.op.foreseen, foreseen{lock: h.lock, token: l.Token, predecessors: h.nextPredecessors})
		}
		h.op.emit(Event{Kind: lk.EventGrant, Client: l.Client, Lock: l.Lock,
			At: at, Token: l.Token, ExpiresAt: l.ExpiresAt, FromQueue: true, Position: head.Position, Mode: l.Mode})
		if l.ExpiresAt <= h.lapseBy {
			heap.Push(&h.pending, l)
			h.lapsedHere = append(h.lapsedHere, l)
		} else {
			h.survivors = append(h.survivors, l)
		}
	}
}

// head returns the current head of the queue, loading pages as needed: small
// first (a release usually looks at one waiter), larger as a chain goes on.
func (h *handOver) head() (repo.QueueHead, bool, error) {
	if h.next < len(h.queue) {
		return h.queue[h.next], true, nil
	}
	if h.queueDone {
		return repo.QueueHead{}, false, nil
	}
	after, limit := int64(math.MinInt64), 4
	if len(h.queue) > 0 {
		after, limit = h.queue[len(h.queue)-1].Position, min(4*len(h.queue), 512)
	}
	var page []repo.QueueHead
	var err error
	if len(h.queue) == 0 && h.lapseBy == math.MinInt64 && h.op.Config.Explain {
		// A release's hand-over: the predecessors of an exclusive head's
		// grant come with the page, a round trip fewer where the database
		// pipelines (explainGrants takes them).
		var next *[]lk.Predecessor
		page, next, err = repo.QueuePageWithNext(h.tx, h.lock, after, limit, h.lapseBy, h.op.Config.History.keep(), maxPredecessors)
		if err == nil && next != nil && len(page) > 0 {
			h.nextPredecessors, h.nextToken = *next, page[0].LastToken+1
		}
	} else {
		page, err = repo.QueuePage(h.tx, h.lock, after, limit, h.lapseBy)
	}
	if err != nil {
		return repo.QueueHead{}, false, err
	}
	if len(page) < limit {
		h.queueDone = true
	}
	if len(page) == 0 {
		return repo.QueueHead{}, false, nil
	}
	if len(h.queue) == 0 {
		h.lastToken, h.staying = page[0].LastToken, page[0].Staying
	}
	h.queue, h.next = page, 0
	return h.queue[0], true, nil
}

// compatible is S1 for a request in mode m against the holders at this
// instant: those counted here and those staying.
func (h *handOver) compatible(m lk.Mode) bool {
	if h.exclusive > 0 || (m == lk.Exclusive && h.shared > 0) {
		return false
	}
	return lk.Compatible(h.staying, m)
}

// apply writes what grantHeads decided: the granted waiters leave the queue
// (they are its first entries, up to lastPosition) and stop waiting, the
// counter moves on, and the grants still live become leases.
func (h *handOver) apply() error {
	if h.granted == 0 {
		return nil
	}
	waiters := make([]string, 0, h.granted)
	for _, gs := range [][]repo.LeaseRow{h.survivors, h.lapsedHere} {
		for _, g := range gs {
			waiters = append(waiters, g.Client)
		}
	}
	if err := repo.QueueGrantThrough(h.tx, h.lock, h.lastPosition, h.granted, h.lastToken, waiters); err != nil {
		return err
	}
	for _, l := range h.survivors {
		if err := repo.LeaseInsert(h.tx, l); err != nil {
			return err
		}
		h.op.State.NoteExpiry(l.ExpiresAt)
	}
	for _, l := range h.lapsedHere {
		// The lock's last token at its lapse: the last of this hand-over's
		// grants made before it (those before the hand-over are older).
		endedAfter := l.Token
		for _, gs := range [][]repo.LeaseRow{h.survivors, h.lapsedHere} {
			for _, g := range gs {
				if g.Token > endedAfter && g.GrantedAt < l.ExpiresAt {
					endedAfter = g.Token
				}
			}
		}
		if err := repo.GrantInsertLapsed(h.tx, l, endedAfter); err != nil {
			return err
		}
	}
	return repo.GrantsPruneLock(h.tx, h.lock, h.lastToken, h.op.Config.History.keep())
}
