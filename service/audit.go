package service

import "github.com/leasekeeper/leasekeeper/repo"

// Witness is one thing an audit line says a transaction did, in terms the
// database can confirm or deny afterwards.
type Witness struct {
	Kind            WitnessKind
	Lock, Client    string
	Token, Position int64
	Fence           int64 // WitnessUnfence: the fence before
}

// WitnessKind says what a Witness claims.
type WitnessKind int

const (
	// WitnessGrant: Token was granted on Lock.
	WitnessGrant WitnessKind = iota + 1
	// WitnessEnd: Client's lease on Lock with Token ended (lapse, release,
	// revoke, deadlock abort).
	WitnessEnd
	// WitnessDequeue: the queue entry at Position on Lock was removed
	// (withdrawal, deadlock abort).
	WitnessDequeue
	// WitnessUnfence: Lock's fence was set back from Fence to Token.
	WitnessUnfence
)

// AuditCommitted tells whether the transaction that did ws committed. It is
// for the audit lines a server wrote ahead of a COMMIT and then was killed:
// they may describe a transaction that never committed. It must run before
// any other transaction of the database since, and decides by the first
// witness that the database can judge: a grant committed if the lock's
// counter reached its token (counters never go back, and no transaction ran
// since); an end, if the lease with that token is gone; a withdrawal, if the
// entry is gone (positions are never reused). known is false when no
// witness can be judged. (On a database with peers other servers may have
// changed what the witnesses look at: the runtime does not ask there.)
func AuditCommitted(tx *repo.Tx, ws []Witness) (committed, known bool, err error) {
	for _, w := range ws {
		switch w.Kind {
		case WitnessGrant:
			last, err := repo.LockLastToken(tx, w.Lock)
			return last >= w.Token, err == nil, err
		case WitnessEnd:
			l, held, err := repo.LeaseGet(tx, w.Lock, w.Client)
			return !held || l.Token != w.Token, err == nil, err
		case WitnessDequeue:
			queued, err := repo.QueueHas(tx, w.Lock, w.Position)
			return !queued, err == nil, err
		case WitnessUnfence:
			// Below the fence before: only an unfence lowers a fence (a
			// write of the same group may have raised it again, under it).
			highest, _, err := repo.StoreFenceGet(tx, w.Lock)
			return highest < w.Fence, err == nil, err
		}
	}
	return false, false, nil
}
