package service

import (
	"math"

	"github.com/leasekeeper/leasekeeper/repo"
)

// retire implements L1 and L3: every lease with expires_at <= now is retired
// in the order the leases ended, and each retirement hands its lock over at
// the instant that lease ended. A waiter granted that way whose own lease has
// also ended by now is retired in the same sweep, so a chain of hand-overs
// over an idle gap comes out as if each had been noticed on time.
//
// Lapses of different locks never interact (a grant changes only its lock and
// its client's wait, and a client waits for one lock at most), so each lock's
// chain is settled on its own, in time order, and written back with a few
// set-based statements.
func retire(op *Op) error {
	tx, now := op.Tx, op.Now
	if now < op.State.NextExpiry {
		return nil
	}
	lapsed, err := repo.LeasesExpiredBy(tx, now)
	if err != nil {
		return err
	}
	byLock := map[string]lapseHeap{}
	var order []string
	for _, l := range lapsed {
		if _, seen := byLock[l.Lock]; !seen {
			order = append(order, l.Lock)
		}
		byLock[l.Lock] = append(byLock[l.Lock], l) // already in lapse order: a valid heap
	}
	for _, lock := range order {
		h := newHandOver(op, lock, now)
		h.pending = byLock[lock]
		for _, l := range h.pending {
			h.count(l.Mode, +1)
		}
		if err := h.run(); err != nil {
			return err
		}
	}
	if len(lapsed) > 0 {
		if err := repo.GrantsLapse(tx, now); err != nil {
			return err
		}
		if err := repo.LeasesDeleteExpiredBy(tx, now); err != nil {
			return err
		}
	}
	at, ok, err := repo.LeasesEarliestExpiry(tx)
	if err != nil {
		return err
	}
	op.State.NextExpiry = math.MaxInt64
	if ok {
		op.State.NextExpiry = at
	}
	return nil
}

// lapseHeap orders leases by (expires_at, lock, token), the order in which
// LeasesExpiredBy returns them.
type lapseHeap []repo.LeaseRow

func (h lapseHeap) Len() int { return len(h) }
func (h lapseHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.ExpiresAt != b.ExpiresAt {
		return a.ExpiresAt < b.ExpiresAt
	}
	if a.Lock != b.Lock {
		return a.Lock < b.Lock
	}
	return a.Token < b.Token
}
func (h lapseHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *lapseHeap) Push(x any)   { *h = append(*h, x.(repo.LeaseRow)) }
func (h *lapseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
