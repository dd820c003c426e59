package repo

// The locks table keeps each lock's fencing counter and queue bookkeeping.
// Callers read the current values in the same transaction first
// (RequestStateGet, QueuePage) and so know the token a write hands out:
// plain UPDATEs cost a quarter of UPDATE ... RETURNING here.

// LockGrant records a grant on the spot: the lock's counter moves on to
// l.Token (created at l.Token for a new lock: 1, L5, but after an accepted
// rollback), l becomes a lease (which is
// its grant's row in the history while it lives), and the history drops
// the lock's ended rows that the new token pushes out of the keep last
// tokens, a step at a time (historyPruneBound). Where the dialect can
// (PostgreSQL), the writes go as one statement, round trips less.
func LockGrant(tx *Tx, l LeaseRow, newLock bool, keep int64) error {
	grant := qLockGrantTakeToken
	if newLock {
		grant = qLockGrantNewLock
	}
	if tx.has(grant) {
		err := tx.write(grant, l.Lock, l.Client, l.Mode, l.Token, l.GrantedAt, l.ExpiresAt, historyPruneBound(l.Token, keep))
		return err
	}
	tx.d.ends.issued(l.Lock, l.Token, 1)
	var err error
	if newLock {
		err = LockCreate(tx, l.Lock, l.Token)
	} else {
		err = LockTakeToken(tx, l.Lock)
	}
	if err != nil {
		return err
	}
	if err := LeaseInsert(tx, l); err != nil {
		return err
	}
	return GrantsPruneLock(tx, l.Lock, l.Token, keep)
}

var qLockCreate = portable("LockCreate", `INSERT INTO locks (name, last_token) VALUES (?, ?)`)

// LockCreate inserts a lock whose first grant, of token, is happening now:
// token 1 (L5), or the service's TokenFloor + 1 after an accepted rollback.
func LockCreate(tx *Tx, lock string, token int64) error {
	err := tx.write(qLockCreate, lock, token)
	return err
}

var qLockTakeToken = portable("LockTakeToken", `UPDATE locks SET last_token = last_token + 1 WHERE name = ?`)

// LockTakeToken advances the lock's fencing counter by one (L5).
func LockTakeToken(tx *Tx, lock string) error {
	err := tx.write(qLockTakeToken, lock)
	return err
}

var qLockEnqueue = portable("LockEnqueue", `UPDATE locks SET queue_length = queue_length + 1, last_position = last_position + 1
		WHERE name = ?`)

// LockEnqueue counts a new waiter and hands out the next position.
func LockEnqueue(tx *Tx, lock string) error {
	err := tx.write(qLockEnqueue, lock)
	return err
}

var qLockDequeue = portable("LockDequeue", `UPDATE locks SET queue_length = queue_length - 1 WHERE name = ?`)

// LockDequeue records that a waiter left the lock's queue without a grant.
func LockDequeue(tx *Tx, lock string) error {
	err := tx.write(qLockDequeue, lock)
	return err
}
