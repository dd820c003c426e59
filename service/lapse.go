package service

import (
	"container/heap"
	"math"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// retire implements L1 and L3: every lease with expires_at <= now is removed
// in the order the leases ended, across all locks, and each removal hands the
// lock over at the instant that lease ended. A waiter granted that way whose
// own lease has also ended by now joins the same ordered sweep, so a chain of
// hand-overs over an idle gap comes out as if each had been noticed on time.
func (s *Service) retire(tx *repo.Tx, now int64) error {
	if now < s.nextExpiry {
		return nil
	}
	lapsed, err := repo.LeasesExpiredBy(tx, now)
	if err != nil {
		return err
	}
	h := lapseHeap(lapsed) // already in lapse order, hence a valid heap
	for h.Len() > 0 {
		l := heap.Pop(&h).(repo.Lease)
		if _, err := repo.LeaseDelete(tx, l.Lock, l.Client); err != nil {
			return err
		}
		granted, err := s.promote(tx, l.Lock, l.ExpiresAt)
		if err != nil {
			return err
		}
		for _, g := range granted {
			if g.ExpiresAt <= now {
				heap.Push(&h, g)
			}
		}
	}
	at, ok, err := repo.LeasesEarliestExpiry(tx)
	if err != nil {
		return err
	}
	s.nextExpiry = math.MaxInt64
	if ok {
		s.nextExpiry = at
	}
	return nil
}

// lapseHeap orders leases by (expires_at, lock, token), the order in which
// LeasesExpiredBy returns them.
type lapseHeap []repo.Lease

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
func (h *lapseHeap) Push(x any)   { *h = append(*h, x.(repo.Lease)) }
func (h *lapseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// promote implements S3 on lock: while the head of its queue is compatible
// with the holders, it becomes a holder, with a lease that starts at the
// instant at (L3) and lasts the ttl it asked for, and the next token (S4).
// It returns the leases it granted.
func (s *Service) promote(tx *repo.Tx, lock string, at int64) ([]repo.Lease, error) {
	var granted []repo.Lease
	var held lk.Mode
	heldKnown := false
	for {
		head, found, err := repo.QueueHead(tx, lock)
		if err != nil || !found {
			return granted, err
		}
		if !heldKnown {
			m, err := repo.LeaseHolderMode(tx, lock)
			if err != nil {
				return granted, err
			}
			held, heldKnown = m, true
		}
		if !lk.Compatible(held, head.Mode) {
			return granted, nil
		}
		if err := repo.QueueDelete(tx, lock, head.Position); err != nil {
			return granted, err
		}
		token, err := repo.LockGrantFromQueue(tx, lock)
		if err != nil {
			return granted, err
		}
		l := repo.Lease{Lock: lock, Client: head.Client, Mode: head.Mode, Token: token,
			GrantedAt: at, ExpiresAt: lk.AddTime(at, head.TTL)}
		if err := repo.LeaseInsert(tx, l); err != nil {
			return granted, err
		}
		if err := repo.ClientSetWaiting(tx, head.Client, ""); err != nil {
			return granted, err
		}
		s.noteExpiry(l.ExpiresAt)
		held = head.Mode
		granted = append(granted, l)
	}
}
