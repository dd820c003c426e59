package repo

// LockQueueLength returns how many waiters lock has; found is false for a lock
// never acquired.
func LockQueueLength(tx *Tx, lock string) (n int64, found bool, err error) {
	found, err = tx.row(`SELECT queue_length FROM locks WHERE name = ?`, []any{lock}, &n)
	return n, found, err
}

// LockCreate inserts a lock whose first grant is happening now: its counter
// starts at token 1 (L5).
func LockCreate(tx *Tx, lock string) error {
	_, err := tx.exec(`INSERT INTO locks (name, last_token) VALUES (?, 1)`, lock)
	return err
}

// LockNextToken takes the lock's next fencing token (L5).
func LockNextToken(tx *Tx, lock string) (token int64, err error) {
	_, err = tx.row(`UPDATE locks SET last_token = last_token + 1 WHERE name = ? RETURNING last_token`,
		[]any{lock}, &token)
	return token, err
}

// LockGrantFromQueue takes the next token for a waiter leaving the queue as a
// holder, in one statement.
func LockGrantFromQueue(tx *Tx, lock string) (token int64, err error) {
	_, err = tx.row(`UPDATE locks SET last_token = last_token + 1, queue_length = queue_length - 1
		WHERE name = ? RETURNING last_token`, []any{lock}, &token)
	return token, err
}

// LockEnqueue reserves a queue place: it returns the new queue length (the
// newcomer's rank, L4) and the position number to store.
func LockEnqueue(tx *Tx, lock string) (length, position int64, err error) {
	_, err = tx.row(`UPDATE locks SET queue_length = queue_length + 1, last_position = last_position + 1
		WHERE name = ? RETURNING queue_length, last_position`, []any{lock}, &length, &position)
	return length, position, err
}

// LockDequeue records that a waiter left the lock's queue without a grant.
func LockDequeue(tx *Tx, lock string) error {
	_, err := tx.exec(`UPDATE locks SET queue_length = queue_length - 1 WHERE name = ?`, lock)
	return err
}
