package repo

import lk "github.com/leasekeeper/leasekeeper"

// QueueEntry is one row of queue_entries.
type QueueEntry struct {
	Lock     string  `db:"lock"`
	Position int64   `db:"position"`
	Client   string  `db:"client"`
	Mode     lk.Mode `db:"mode"`
	TTL      int64   `db:"ttl"`
	QueuedAt int64   `db:"queued_at"`
}

// QueueAppend stores a waiter at the position LockEnqueue reserved.
func QueueAppend(tx *Tx, e QueueEntry) error {
	_, err := tx.exec(`INSERT INTO queue_entries (lock, position, client, mode, ttl, queued_at)
		VALUES (?, ?, ?, ?, ?, ?)`, e.Lock, e.Position, e.Client, e.Mode, e.TTL, e.QueuedAt)
	return err
}

// QueueHead returns the oldest waiter for lock; found is false for an empty queue.
func QueueHead(tx *Tx, lock string) (e QueueEntry, found bool, err error) {
	e.Lock = lock
	found, err = tx.row(`SELECT position, client, mode, ttl, queued_at FROM queue_entries
		WHERE lock = ? ORDER BY position LIMIT 1`, []any{lock}, &e.Position, &e.Client, &e.Mode, &e.TTL, &e.QueuedAt)
	return e, found, err
}

// QueueDelete removes the entry at position of lock's queue.
func QueueDelete(tx *Tx, lock string, position int64) error {
	_, err := tx.exec(`DELETE FROM queue_entries WHERE lock = ? AND position = ?`, lock, position)
	return err
}

// QueueDeleteClient removes client's queue entry and returns the lock it was
// for; found is false when client was not waiting.
func QueueDeleteClient(tx *Tx, client string) (lock string, found bool, err error) {
	found, err = tx.row(`DELETE FROM queue_entries WHERE client = ? RETURNING lock`, []any{client}, &lock)
	return lock, found, err
}

// QueueRank returns client's place in line on the lock it waits for (1 = next).
// It counts the entries ahead, so it is kept off the hot path: a fresh
// waiter's rank is the queue length LockEnqueue returns.
func QueueRank(tx *Tx, client string) (rank int64, err error) {
	_, err = tx.row(`SELECT count(*) FROM queue_entries q JOIN queue_entries me
		ON me.client = ? AND q.lock = me.lock AND q.position <= me.position`, []any{client}, &rank)
	return rank, err
}

// QueueOfLock lists lock's waiters, oldest first (S4).
func QueueOfLock(tx *Tx, lock string) ([]lk.Waiter, error) {
	ws := []lk.Waiter{}
	err := tx.selectAll(&ws, `SELECT client, mode FROM queue_entries WHERE lock = ? ORDER BY position`, lock)
	return ws, err
}
