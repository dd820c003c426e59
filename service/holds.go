package service

import "github.com/leasekeeper/leasekeeper/repo"

// HoldsQuery asks whether Client holds a live lease on Lock, or, with
// OrWaits, waits in its queue: whether a renew (a lease) or a release (a
// lease or a wait) by it has something to act on.
type HoldsQuery struct {
	Client, Lock string
	OrWaits      bool
}

// Holds answers q in two lookups by key, whatever else the client holds.
// Apart, a lease that ended by op.Now but is not retired yet is not held: a
// renew of it would fail. It is the server's gate for a principal over its
// rate, which gets renew and release only for what it really holds.
func Holds(op *Op, q HoldsQuery) (bool, error) {
	l, found, err := repo.LeaseGet(op.Tx, q.Lock, q.Client)
	if err != nil || found && l.ExpiresAt > op.Now {
		return err == nil, err
	}
	if !q.OrWaits {
		return false, nil
	}
	waitingFor, err := repo.ClientWaitingFor(op.Tx, q.Client)
	return err == nil && waitingFor == q.Lock, err
}
