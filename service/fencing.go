package service

import (
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Strict fencing (Config.StrictFencing) binds the fenced store's writes to
// grants. L6 alone accepts any token at least the highest accepted, so one
// write with a huge token, never granted, fences a lock for good: no holder's
// token reaches it again. Strict fencing refuses a token above the lock's
// last issued one (locks.last_token, 0 for a lock never granted), in the
// transaction of the write; Unfence repairs a lock fenced that way before.

// granted returns, as refused, an *lk.Error of lk.CodeTokenNotGranted when
// token was never issued for lock, or, when mayActAs is not nil,
// was not granted to a client id it accepts; nil when the write may go on.
func granted(tx *repo.Tx, lock string, token int64, mayActAs func(string) bool) (refused, err error) {
	last, err := repo.LockLastToken(tx, lock)
	if err != nil {
		return nil, err
	}
	switch {
	case last == 0:
		return lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("no token was ever granted for %s: acquire it first", lock)), nil
	case token > last:
		return lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("token %d was never granted for %s: its last issued token is %d",
			token, lock, last)), nil
	case mayActAs == nil:
		return nil, nil
	}
	client, found, err := repo.GrantClientByToken(tx, lock, token)
	switch {
	case err != nil:
		return nil, err
	case !found:
		// Pruned from the history: the lease ended long ago, and its
		// holder is not the one to write now.
		return lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("token %d of %s has no grant on record: its lease ended long ago",
			token, lock)), nil
	case !mayActAs(client):
		// The holder's client id is not named: a client principal sees
		// only its own client ids.
		return lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("token %d of %s was granted to a client id this principal may not act as",
			token, lock)), nil
	}
	return nil, nil
}

// Unfence sets the fenced store's fence for a lock back to the lock's last
// issued token, when it is above it, so that the lock's holders can write
// again; an lk.EventUnfence reports it. A fence at or below the last issued
// token is left as it is: lowering it would let a holder's stale token
// through.
func Unfence(op *Op, req lk.UnfenceRequest) (lk.UnfenceResult, error) {
	if err := req.Validate(); err != nil {
		return lk.UnfenceResult{}, err
	}
	highest, _, err := repo.StoreFenceGet(op.Tx, req.Lock)
	if err != nil {
		return lk.UnfenceResult{}, err
	}
	last, err := repo.LockLastToken(op.Tx, req.Lock)
	if err != nil {
		return lk.UnfenceResult{}, err
	}
	out := lk.UnfenceResult{Outcome: lk.OK, Was: highest, Highest: highest}
	lowered, err := repo.StoreFenceLower(op.Tx, req.Lock, last)
	if err != nil || !lowered {
		return out, err
	}
	out.Highest = last
	op.emit(Event{Kind: lk.EventUnfence, Lock: req.Lock, At: op.Now, Token: last, Highest: highest, By: req.By})
	return out, nil
}
