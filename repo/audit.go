package repo

// What the audit log needs beyond the rules: the lease or queue entry an
// operation removes, read by the statement that removes it (an audit line
// names the mode and token of what ended, at no extra round trip), and the
// two reads that tell, after a kill, whether the last audited transaction
// committed (service.AuditCommitted).

var qLeaseTake = portable("LeaseTake", `DELETE FROM leases WHERE lock = ?1 AND client = ?2
		RETURNING mode, token, granted_at, expires_at, COALESCE((SELECT queue_length FROM locks WHERE name = ?1), 0)`)

// LeaseTake removes client's lease on lock and returns it, with how many
// wait for the lock (a release that finds none reads no queue); found is
// false when there was none.
func LeaseTake(tx *Tx, lock, client string) (l LeaseRow, waiting int64, found bool, err error) {
	l.Lock, l.Client = lock, client
	found, err = tx.row(qLeaseTake, []any{lock, client}, &l.Mode, &l.Token, &l.GrantedAt, &l.ExpiresAt, &waiting)
	return l, waiting, found, err
}

var qQueueTakeClient = portable("QueueTakeClient", `DELETE FROM queue_entries WHERE client = ?
		RETURNING lock, position, mode, ttl, queued_at`)

// QueueTakeClient removes client's queue entry, if it has one, and returns
// it; found is false when there was none.
func QueueTakeClient(tx *Tx, client string) (e QueueEntry, found bool, err error) {
	e.Client = client
	found, err = tx.row(qQueueTakeClient, []any{client}, &e.Lock, &e.Position, &e.Mode, &e.TTL, &e.QueuedAt)
	return e, found, err
}

var qLockLastToken = portable("LockLastToken", `SELECT last_token FROM locks WHERE name = ?`)

// LockLastToken returns lock's fencing counter: the highest token it ever
// handed out, 0 for a lock never granted.
func LockLastToken(tx *Tx, lock string) (int64, error) {
	v, _, err := tx.rowInt(qLockLastToken, lock)
	return v, err
}

var qQueueHas = portable("QueueHas", `SELECT 1 FROM queue_entries WHERE lock = ? AND position = ?`)

// QueueHas reports whether lock's queue still holds the entry at position.
func QueueHas(tx *Tx, lock string, position int64) (bool, error) {
	var one int
	return tx.row(qQueueHas, []any{lock, position}, &one)
}
