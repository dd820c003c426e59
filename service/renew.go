package service

import (
	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Renew sets client's lease on lock to end at op.Now+ttl, keeping its token
// (L2). It returns lk.ErrInvalidTTL for a ttl out of range, and
// lk.ErrNotHolder when client holds no live lease on lock.
func Renew(op *Op, req lk.RenewRequest) (lk.RenewResult, error) {
	if err := req.Validate(); err != nil {
		return lk.RenewResult{}, err
	}
	client, lock := req.Client, req.Lock
	exp := lk.AddTime(op.Now, req.TTL)
	token, grantedAt, found, err := repo.LeaseRenew(op.Tx, lock, client, exp)
	if err != nil {
		return lk.RenewResult{}, err
	}
	if !found {
		msg, err := abortedMessage(op, client, lock)
		if err != nil {
			return lk.RenewResult{}, err
		}
		if msg != "" {
			return lk.RenewResult{}, lk.Errorf(lk.CodeNotHolder, msg)
		}
		return lk.RenewResult{}, notHolder(client, lock)
	}
	op.State.NoteExpiry(exp)
	op.emit(Event{Kind: lk.EventRenew, Client: client, Lock: lock, At: op.Now, Token: token, ExpiresAt: exp})
	return lk.RenewResult{Outcome: lk.Renewed, Token: token, GrantedAt: grantedAt, ExpiresAt: exp}, nil
}

// notHolder is the error of a renew, release or revoke by a client without
// a live lease on lock.
func notHolder(client, lock string) error {
	return lk.Errorf(lk.CodeNotHolder, client+" holds no live lease on "+lock)
}
