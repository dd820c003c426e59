package repo

// The grants table: the history of every token granted (migrations/sqlite/
// 00003_grants.sql). A grant's row is written in the transaction that
// grants the lease and ended in the one that ends it. Two statements of
// other files write it too, where one statement does the work of several on
// PostgreSQL: the dialect's lockGrant (a grant on the spot), leaseRenew and
// leaseEnd.
//
// Retention. Per lock, the history keeps the ended rows of the lock's last
// keep tokens: each grant of token T deletes the lock's ended rows with
// tokens up to T-keep, a range of an index that holds only ended rows
// (grants_ended_by_lock), so that it reads only the rows it deletes, and
// no live lease's row, however many shared holders the lock has. By age, ended
// rows whose ended_at is older than a bound go in small batches, through
// the index on ended_at (GrantsPruneEndedBefore). Neither reads rows it
// does not delete.

import (
	"database/sql"
	"math"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/bare"
)

var qGrantInsert = portable("GrantInsert", `INSERT INTO grants (lock, token, client, mode, granted_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (lock, token) DO NOTHING`)

// GrantInsert records the grant of lease l, live. A token already recorded
// for the lock keeps its row: tokens are never reissued (L5), so only a
// fault injected for the tests (failpoint.ReissueToken) gets here, and its
// checks, not a refused grant, must find it.
func GrantInsert(tx *Tx, l LeaseRow) error {
	if bare.Build {
		return nil
	}
	err := tx.write(qGrantInsert, l.Lock, l.Token, l.Client, l.Mode, l.GrantedAt, l.ExpiresAt)
	return err
}

var qGrantInsertEnded = portable("GrantInsertEnded", `INSERT INTO grants
		(lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (lock, token) DO NOTHING`)

// GrantInsertLapsed records a grant that lapsed in the operation that made
// it: a waiter granted during a hand-over whose own lease had run out by
// then (L3), which never becomes a row of leases. endedAfter is the lock's
// last token granted before l.ExpiresAt (explain.go).
func GrantInsertLapsed(tx *Tx, l LeaseRow, endedAfter int64) error {
	if bare.Build {
		return nil
	}
	err := tx.write(qGrantInsertEnded, l.Lock, l.Token, l.Client, l.Mode, l.GrantedAt, l.ExpiresAt,
		l.ExpiresAt, lk.EndLapsed, endedAfter)
	return err
}

var qGrantRenew = portable("GrantRenew", `UPDATE grants SET expires_at = ? WHERE lock = ? AND token = ?`)

// grantRenew keeps the row of lock's token current after a renew.
func grantRenew(tx *Tx, lock string, token, expiresAt int64) error {
	if bare.Build {
		return nil
	}
	err := tx.write(qGrantRenew, expiresAt, lock, token)
	return err
}

var qGrantEnd = portable("GrantEnd", `UPDATE grants SET ended = ?1, ended_at = ?2,
		ended_after_token = (SELECT last_token FROM locks WHERE name = ?3) WHERE lock = ?3 AND token = ?4`)

// grantEnd records that lock's token ended, how and when, and after which
// of the lock's tokens (explain.go): the last issued, as an operation ends
// leases before it grants any.
func grantEnd(tx *Tx, lock string, token int64, how lk.Ending, at int64) error {
	if bare.Build {
		return nil
	}
	err := tx.write(qGrantEnd, how, at, lock, token)
	return err
}

var qGrantsLapse = portable("GrantsLapse", `UPDATE grants SET ended = 'lapsed', ended_at = expires_at,
		ended_after_token = (SELECT g.token FROM grants g WHERE g.lock = grants.lock AND g.granted_at < grants.expires_at
			ORDER BY g.token DESC LIMIT 1)
		WHERE (lock, token) IN (SELECT lock, token FROM leases WHERE expires_at <= ?)`)

// GrantsLapse ends, as lapsed at their expires_at, the rows of every lease
// with expires_at <= now: run before LeasesDeleteExpiredBy deletes them.
// Noticed late, a lapse still comes after the lock's last token granted
// before its expires_at, and before the one the noticing operation grants
// (at or after it): a lock's tokens follow its grants' times, and the walk
// down from its last token reads only the grants made since the lapse.
func GrantsLapse(tx *Tx, now int64) error {
	if bare.Build {
		return nil
	}
	err := tx.write(qGrantsLapse, now)
	return err
}

// qGrantsPruneLock walks the index of ended rows (grants_ended_by_lock),
// never the live rows of a lock's crowd of shared holders. SQLite, which
// would take the primary key for the same range, is told so.
var qGrantsPruneLock = perDialect("GrantsPruneLock", func(d dialect) string {
	return `DELETE FROM grants ` + d.indexedBy("grants_ended_by_lock") + ` WHERE lock = ? AND token <= ? AND ended IS NOT NULL`
})

// GrantsPruneLock deletes lock's ended rows once its counter reached
// lastToken: those among the tokens before its last keep. It does nothing,
// and runs nothing, while no token can be that old.
func GrantsPruneLock(tx *Tx, lock string, lastToken, keep int64) error {
	if lastToken <= keep {
		return nil
	}
	err := tx.write(qGrantsPruneLock, lock, lastToken-keep)
	return err
}

var qGrantsPruneEndedBefore = portable("GrantsPruneEndedBefore", `DELETE FROM grants WHERE (lock, token) IN
		(SELECT lock, token FROM grants WHERE ended_at IS NOT NULL AND ended_at < ? ORDER BY ended_at LIMIT ?)`)

// GrantsPruneEndedBefore deletes up to limit rows of leases that ended
// before `before`, oldest first, and reports how many it deleted.
func GrantsPruneEndedBefore(tx *Tx, before int64, limit int) (int64, error) {
	return tx.affected(qGrantsPruneEndedBefore, before, limit)
}

// grantColumns is the select list every history read scans (scanGrants).
const grantColumns = `lock, token, client, mode, granted_at, expires_at, ended_at, ended`

var (
	qGrantsOfLock   = portable("GrantsOfLock", `SELECT `+grantColumns+` FROM grants WHERE lock = ? AND token < ? ORDER BY token DESC LIMIT ?`)
	qGrantsOfClient = portable("GrantsOfClient", `SELECT `+grantColumns+` FROM grants
		WHERE client = ?1 ORDER BY granted_at DESC, lock DESC, token DESC LIMIT ?2`)
	qGrantsOfClientAfter = portable("GrantsOfClient.after", `SELECT `+grantColumns+` FROM grants
		WHERE client = ?1 AND (granted_at, lock, token) < (?2, ?3, ?4)
		ORDER BY granted_at DESC, lock DESC, token DESC LIMIT ?5`)
)

// GrantsOfLock returns up to limit of lock's grants with tokens below
// before (0: from the newest), newest first, and whether there are more.
func GrantsOfLock(tx *Tx, lock string, before int64, limit int) ([]lk.GrantRecord, bool, error) {
	if before == 0 {
		before = math.MaxInt64
	}
	return scanGrants(tx, limit, qGrantsOfLock, lock, before, limit+1)
}

// GrantsOfClient returns up to limit of client's grants, newest first (by
// granted_at, then lock and token, descending), after cursor c (nil: from
// the newest), and whether there are more.
func GrantsOfClient(tx *Tx, client string, c *lk.ClientCursor, limit int) ([]lk.GrantRecord, bool, error) {
	if c == nil {
		return scanGrants(tx, limit, qGrantsOfClient, client, limit+1)
	}
	return scanGrants(tx, limit, qGrantsOfClientAfter, client, c.GrantedAt, c.Lock, c.Token, limit+1)
}

// scanGrants runs q, which selects grantColumns and at most limit+1 rows,
// and returns the first limit and whether there was one more.
func scanGrants(tx *Tx, limit int, q statement, args ...any) ([]lk.GrantRecord, bool, error) {
	out := []lk.GrantRecord{}
	err := tx.each(q, args, func(scan func(...any) error) error {
		var g lk.GrantRecord
		var endedAt sql.NullInt64
		var ended sql.NullString
		if err := scan(&g.Lock, &g.Token, &g.Client, &g.Mode, &g.GrantedAt, &g.ExpiresAt, &endedAt, &ended); err != nil {
			return err
		}
		if endedAt.Valid {
			g.EndedAt = &endedAt.Int64
		}
		if ended.Valid {
			e := lk.Ending(ended.String)
			g.Ended = &e
		}
		out = append(out, g)
		return nil
	})
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, err
}
