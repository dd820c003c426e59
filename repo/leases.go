package repo

import (
	"database/sql"

	lk "github.com/leasekeeper/leasekeeper"
)

// LeaseRow is one row of the leases table.
type LeaseRow struct {
	Lock      string  `db:"lock"`
	Client    string  `db:"client"`
	Mode      lk.Mode `db:"mode"`
	Token     int64   `db:"token"`
	GrantedAt int64   `db:"granted_at"`
	ExpiresAt int64   `db:"expires_at"`
}

var qLeaseInsert = portable("LeaseInsert", `INSERT INTO leases (lock, client, mode, token, granted_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`)

// LeaseInsert stores a new lease.
func LeaseInsert(tx *Tx, l LeaseRow) error {
	err := tx.write(qLeaseInsert, l.Lock, l.Client, l.Mode, l.Token, l.GrantedAt, l.ExpiresAt)
	return err
}

var qLeaseDelete = portable("LeaseDelete", `DELETE FROM leases WHERE lock = ? AND client = ?`)

// LeaseDelete removes client's lease on lock; deleted is false when there was none.
func LeaseDelete(tx *Tx, lock, client string) (deleted bool, err error) {
	n, err := tx.affected(qLeaseDelete, lock, client)
	return n == 1, err
}

var (
	qLeaseRenew     = portable("LeaseRenew", `UPDATE leases SET expires_at = ? WHERE lock = ? AND client = ?`)
	qLeaseRenewRead = portable("LeaseRenew.read", `SELECT token, granted_at FROM leases WHERE lock = ? AND client = ?`)
	qLeaseRenewOne  = perDialect("LeaseRenew.one", dialect.leaseRenew)
)

// LeaseRenew moves the expiry of client's lease on lock (L2), which is
// also its grant's row in the history (grants.go), and returns its token
// and start; found is false when client holds no lease on lock.
func LeaseRenew(tx *Tx, lock, client string, expiresAt int64) (token, grantedAt int64, found bool, err error) {
	if tx.has(qLeaseRenewOne) {
		found, err = tx.row(qLeaseRenewOne, []any{expiresAt, lock, client}, &token, &grantedAt)
		return token, grantedAt, found, err
	}
	n, err := tx.affected(qLeaseRenew, expiresAt, lock, client)
	if err != nil || n == 0 {
		return 0, 0, false, err
	}
	if found, err = tx.row(qLeaseRenewRead, []any{lock, client}, &token, &grantedAt); err != nil || !found {
		return token, grantedAt, found, err
	}
	return token, grantedAt, true, nil
}

var qLeaseEndOne = perDialect("LeaseEnd.one", dialect.leaseEnd)

// qLeaseEndAhead reads what LeaseEnd.one returns, without the end.
var qLeaseEndAhead = portable("LeaseEndAhead", `SELECT l.mode, l.token, l.granted_at, l.expires_at, k.queue_length
		FROM leases l JOIN locks k ON k.name = l.lock WHERE l.lock = ?1 AND l.client = ?2`)

// WarmLeaseEnd is the read of LeaseEnd for client and lock, where the
// database pipelines (warm.go).
func WarmLeaseEnd(client, lock string) Warm {
	return Warm{&warm{reads: []read{{q: qLeaseEndAhead, args: []any{lock, client}}}, lock: lock, client: client}}
}

// LeaseEnd removes client's lease on lock and ends its grant's row, how at
// instant at (a release, revoke or abort), and returns the lease; found is
// false when there was none (and waiting 0). waiting is how many wait for
// the lock, read with the lease: by the statement that deletes it, or by
// the read sent ahead of it (below). A hand-over that finds none reads no
// queue: on PostgreSQL a round trip less, on SQLite a statement less in
// the committer's turn.
//
// Where the lease and the count were read ahead (WarmLeaseEnd), the end
// is only queued, to go with the transaction's next batch: the rows kept
// are the rows it would delete and read.
func LeaseEnd(tx *Tx, lock, client string, how lk.Ending, at int64) (l LeaseRow, waiting int64, found bool, err error) {
	if tx.has(qLeaseEndOne) {
		l.Lock, l.Client = lock, client
		args := []any{lock, client, how, at}
		taken, err := tx.takeKept([]read{readRow(qLeaseEndAhead, []any{lock, client}, &found,
			&l.Mode, &l.Token, &l.GrantedAt, &l.ExpiresAt, &waiting)})
		if taken {
			if err == nil && found {
				err = tx.write(qLeaseEndOne, args...)
			}
			return l, waiting, found, err
		}
		found, err = tx.row(qLeaseEndOne, args, &l.Mode, &l.Token, &l.GrantedAt, &l.ExpiresAt, &waiting)
		return l, waiting, found, err
	}
	if l, waiting, found, err = LeaseTake(tx, lock, client); err != nil || !found {
		return l, waiting, found, err
	}
	return l, waiting, true, grantEnd(tx, l, how, at)
}

var qLeaseGet = portable("LeaseGet",
	`SELECT mode, token, granted_at, expires_at FROM leases WHERE lock = ? AND client = ?`)

// LeaseGet returns client's lease on lock.
func LeaseGet(tx *Tx, lock, client string) (l LeaseRow, found bool, err error) {
	l.Lock, l.Client = lock, client
	found, err = tx.row(qLeaseGet, []any{lock, client}, &l.Mode, &l.Token, &l.GrantedAt, &l.ExpiresAt)
	return l, found, err
}

var qLeasesExpiredBy = portable("LeasesExpiredBy", `SELECT lock, client, mode, token, granted_at, expires_at FROM leases
		WHERE expires_at <= ? ORDER BY expires_at, lock, token`)

// LeasesExpiredBy returns every lease with expires_at <= now, in the order
// they lapsed (L1, L3): an indexed range scan.
func LeasesExpiredBy(tx *Tx, now int64) ([]LeaseRow, error) {
	var ls []LeaseRow
	err := tx.selectAll(&ls, qLeasesExpiredBy, now)
	return ls, err
}

var qLeasesDeleteExpiredBy = portable("LeasesDeleteExpiredBy", `DELETE FROM leases WHERE expires_at <= ?`)

// LeasesDeleteExpiredBy deletes every lease with expires_at <= now.
func LeasesDeleteExpiredBy(tx *Tx, now int64) error {
	err := tx.write(qLeasesDeleteExpiredBy, now)
	return err
}

var qLeasesEarliestExpiry = portable("LeasesEarliestExpiry", `SELECT min(expires_at) FROM leases`)

// LeasesEarliestExpiry returns the smallest expires_at of all leases; ok is
// false when there are none.
func LeasesEarliestExpiry(tx *Tx) (at int64, ok bool, err error) {
	var v sql.NullInt64
	_, err = tx.row(qLeasesEarliestExpiry, nil, &v)
	return v.Int64, v.Valid, err
}

var qLeasesOfClient = portable("LeasesOfClient", `SELECT lock, mode, token, expires_at FROM leases
		WHERE client = ? ORDER BY lock`)

// LeasesOfClient lists client's leases by lock name, byte-wise (D4.3).
func LeasesOfClient(tx *Tx, client string) ([]lk.Holder, error) {
	var rows []LeaseRow
	err := tx.selectAll(&rows, qLeasesOfClient, client)
	return holdsOf(rows), err
}

// holdsOf turns a client's lease rows into holders as the answers show
// them: by lock, the client left out.
func holdsOf(rows []LeaseRow) []lk.Holder {
	out := make([]lk.Holder, len(rows))
	for i, r := range rows {
		out[i] = lk.Holder{Lock: r.Lock, Mode: r.Mode, Token: r.Token, ExpiresAt: r.ExpiresAt}
	}
	return out
}
