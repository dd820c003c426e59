package repo

import (
	"database/sql"

	lk "github.com/leasekeeper/leasekeeper"
)

// Lease is one row of the leases table.
type Lease struct {
	Lock      string  `db:"lock"`
	Client    string  `db:"client"`
	Mode      lk.Mode `db:"mode"`
	Token     int64   `db:"token"`
	GrantedAt int64   `db:"granted_at"`
	ExpiresAt int64   `db:"expires_at"`
}

// LeaseInsert stores a new lease.
func LeaseInsert(tx *Tx, l Lease) error {
	_, err := tx.exec(`INSERT INTO leases (lock, client, mode, token, granted_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, l.Lock, l.Client, l.Mode, l.Token, l.GrantedAt, l.ExpiresAt)
	return err
}

// LeaseDelete removes client's lease on lock; deleted is false when there was none.
func LeaseDelete(tx *Tx, lock, client string) (deleted bool, err error) {
	n, err := tx.affected(`DELETE FROM leases WHERE lock = ? AND client = ?`, lock, client)
	return n == 1, err
}

// LeaseRenew moves the expiry of client's lease on lock (L2) and returns its
// token; found is false when client holds no lease on lock.
func LeaseRenew(tx *Tx, lock, client string, expiresAt int64) (token int64, found bool, err error) {
	n, err := tx.affected(`UPDATE leases SET expires_at = ? WHERE lock = ? AND client = ?`, expiresAt, lock, client)
	if err != nil || n == 0 {
		return 0, false, err
	}
	return tx.rowInt(`SELECT token FROM leases WHERE lock = ? AND client = ?`, lock, client)
}

// LeaseGet returns client's lease on lock.
func LeaseGet(tx *Tx, lock, client string) (l Lease, found bool, err error) {
	l.Lock, l.Client = lock, client
	found, err = tx.row(`SELECT mode, token, granted_at, expires_at FROM leases WHERE lock = ? AND client = ?`,
		[]any{lock, client}, &l.Mode, &l.Token, &l.GrantedAt, &l.ExpiresAt)
	return l, found, err
}

// LeasesExpiredBy returns every lease with expires_at <= now, in the order
// they lapsed (L1, L3): an indexed range scan.
func LeasesExpiredBy(tx *Tx, now int64) ([]Lease, error) {
	var ls []Lease
	err := tx.selectAll(&ls, `SELECT lock, client, mode, token, granted_at, expires_at FROM leases
		WHERE expires_at <= ? ORDER BY expires_at, lock, token`, now)
	return ls, err
}

// LeasesDeleteExpiredBy deletes every lease with expires_at <= now.
func LeasesDeleteExpiredBy(tx *Tx, now int64) error {
	_, err := tx.exec(`DELETE FROM leases WHERE expires_at <= ?`, now)
	return err
}

// LeasesEarliestExpiry returns the smallest expires_at of all leases; ok is
// false when there are none.
func LeasesEarliestExpiry(tx *Tx) (at int64, ok bool, err error) {
	var v sql.NullInt64
	_, err = tx.row(`SELECT min(expires_at) FROM leases`, nil, &v)
	return v.Int64, v.Valid, err
}

// LeasesOfClient lists client's leases by lock name, byte-wise (D4.3).
func LeasesOfClient(tx *Tx, client string) ([]lk.Hold, error) {
	hs := []lk.Hold{}
	err := tx.selectAll(&hs, `SELECT lock, mode, token, expires_at FROM leases
		WHERE client = ? ORDER BY lock`, client)
	return hs, err
}

// LeasesAwaited reports whether anybody is queued for a lock that client
// holds: only then can a wait cycle run through client.
func LeasesAwaited(tx *Tx, client string) (bool, error) {
	var one int
	return tx.row(`SELECT 1 FROM leases l WHERE l.client = ?
		AND EXISTS (SELECT 1 FROM queue_entries q WHERE q.lock = l.lock) LIMIT 1`, []any{client}, &one)
}
