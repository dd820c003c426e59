package repo

// The locks table keeps each lock's fencing counter and queue bookkeeping.
// Callers read the current values in the same transaction first
// (RequestStateGet, QueuePage) and so know the token a write hands out:
// plain UPDATEs cost a quarter of UPDATE ... RETURNING here.

// LockCreate inserts a lock whose first grant is happening now: its counter
// starts at token 1 (L5).
func LockCreate(tx *Tx, lock string) error {
	_, err := tx.exec(`INSERT INTO locks (name, last_token) VALUES (?, 1)`, lock)
	return err
}

// LockTakeToken advances the lock's fencing counter by one (L5).
func LockTakeToken(tx *Tx, lock string) error {
	_, err := tx.exec(`UPDATE locks SET last_token = last_token + 1 WHERE name = ?`, lock)
	return err
}

// LockEnqueue counts a new waiter and hands out the next position.
func LockEnqueue(tx *Tx, lock string) error {
	_, err := tx.exec(`UPDATE locks SET queue_length = queue_length + 1, last_position = last_position + 1
		WHERE name = ?`, lock)
	return err
}

// LockDequeue records that a waiter left the lock's queue without a grant.
func LockDequeue(tx *Tx, lock string) error {
	_, err := tx.exec(`UPDATE locks SET queue_length = queue_length - 1 WHERE name = ?`, lock)
	return err
}
