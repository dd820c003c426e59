package repo

// The grant history: one row per token granted, in two places
// (migrations/sqlite/00011_grants_ended.sql), so that an operation writes
// it where a commit costs least:
//
//   - leases: a live grant's history row is its lease's row. A grant writes
//     no other row, and a renew none at all.
//   - grants_ended: the grants that ended, appended in sequence (seq), with
//     the indexes the readers range over: by lock and token, by client,
//     and by lock in end order, which holds only the ends after a token
//     other than their own (explain.go). An end writes the table's last
//     page and an entry in each index it belongs to; nothing moves
//     afterwards.
//
// Every read here reads both (history.go for the pages of the API,
// explain.go for the answers that say why), and the view grants puts them
// together for sqlite3.
//
// Retention. Per lock, the history keeps the ended rows of the lock's last
// keep tokens: each grant of token T deletes the lock's ended rows with
// tokens up to T-keep, rounded down to a step of up to 64 tokens
// (historyPruneBound), through grants_ended_by_lock, which holds ended rows
// only, so that it reads no more than the rows it deletes, and no live
// lease's row, however many shared holders the lock has. By age, ended
// rows whose ended_at is older than a bound go in small batches, in the
// order they were recorded (GrantsPruneEndedBefore).

import (
	"database/sql"
	"math"
	"strconv"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/bare"
)

// endedColumns is what an ended grant's row holds.
const endedColumns = `lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token`

var qGrantInsertEnded = portable("GrantInsertEnded", `INSERT INTO grants_ended (`+endedColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)

// GrantInsertLapsed records a grant that lapsed in the operation that made
// it: a waiter granted during a hand-over whose own lease had run out by
// then (L3), which never becomes a row of leases. endedAfter is the lock's
// last token granted before l.ExpiresAt (explain.go).
func GrantInsertLapsed(tx *Tx, l LeaseRow, endedAfter int64) error {
	if bare.Build {
		return nil
	}
	tx.d.ends.forget(l.Lock)
	err := tx.write(qGrantInsertEnded, l.Lock, l.Token, l.Client, l.Mode, l.GrantedAt, l.ExpiresAt,
		l.ExpiresAt, lk.EndLapsed, endedAfter)
	return err
}

var qGrantEnd = portable("GrantEnd", `INSERT INTO grants_ended (`+endedColumns+`)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, (SELECT last_token FROM locks WHERE name = ?1))`)

// grantEnd records that lease l ended, how and when, and after which of
// the lock's tokens (explain.go): the last issued, as an operation ends
// leases before it grants any. Its lease's row, the grant's row while it
// lived, is deleted in the same operation.
func grantEnd(tx *Tx, l LeaseRow, how lk.Ending, at int64) error {
	if bare.Build {
		return nil
	}
	tx.d.ends.ended(l, how, at)
	err := tx.write(qGrantEnd, l.Lock, l.Token, l.Client, l.Mode, l.GrantedAt, l.ExpiresAt, at, how)
	return err
}

// qGrantsLapse records, as lapsed at their expires_at, every lease with
// expires_at <= now. Noticed late, a lapse still comes after the lock's
// last token granted before its expires_at, and before the one the
// noticing operation grants (at or after it): a lock's tokens follow its
// grants' times, and the walk down from its last token, in each of the
// two places, reads only the grants made since the lapse.
var qGrantsLapse = portable("GrantsLapse", `INSERT INTO grants_ended (`+endedColumns+`)
		SELECT l.lock, l.token, l.client, l.mode, l.granted_at, l.expires_at, l.expires_at, 'lapsed',
			(SELECT max(t) FROM (
				SELECT (SELECT g.token FROM leases g WHERE g.lock = l.lock AND g.granted_at < l.expires_at
					ORDER BY g.token DESC LIMIT 1) AS t
				UNION ALL SELECT (SELECT g.token FROM grants_ended g WHERE g.lock = l.lock AND g.granted_at < l.expires_at
					ORDER BY g.token DESC LIMIT 1)) tokens)
		FROM leases l WHERE l.expires_at <= ? ORDER BY l.expires_at, l.lock, l.token`)

// GrantsLapse records the end of every lease with expires_at <= now, as
// lapsed at its expires_at: run before LeasesDeleteExpiredBy deletes them.
func GrantsLapse(tx *Tx, now int64) error {
	if bare.Build {
		return nil
	}
	tx.d.ends.reset() // the lapses' ends, each after the token it lapsed under
	err := tx.write(qGrantsLapse, now)
	return err
}

// qGrantsPruneLock deletes a lock's ended rows with tokens up to a bound:
// a range of grants_ended_by_lock.
var qGrantsPruneLock = portable("GrantsPruneLock", `DELETE FROM grants_ended WHERE lock = ? AND token <= ?`)

// historyPruneStep is how many tokens a lock's pruning bound moves at a
// time, for keep tokens kept: a sixteenth of them, between 1 and 64. A
// deletion writes pages at the old end of the lock's entries in each
// index of grants_ended and the row's own page, about four WAL frames:
// deleting one row at each grant added them to every grant of a lock past
// keep tokens, some four frames in a one-operation commit's ten, 7 % of the
// pairs per second at one client. Moved in steps, the bound deletes a
// step's rows together, on a page or two of each index, at one grant in
// step (docs/performance.md, "A lock's history pruned in steps").
func historyPruneStep(keep int64) int64 { return min(64, max(1, keep/16)) }

// historyPruneBound is the highest token whose ended row a grant that
// brings lock's counter to lastToken deletes (0: none): the tokens before
// the last keep, down to a multiple of the step. So a lock keeps the rows
// of at least its last keep tokens, and of fewer than keep + step.
func historyPruneBound(lastToken, keep int64) int64 {
	if lastToken <= keep {
		return 0
	}
	step := historyPruneStep(keep)
	return (lastToken - keep) / step * step
}

// GrantsPruneLock deletes lock's ended rows once its counter reached
// lastToken: those up to historyPruneBound. It runs nothing while no token
// can be that old. Between steps the range it reads is empty, and it
// writes no page.
func GrantsPruneLock(tx *Tx, lock string, lastToken, keep int64) error {
	through := historyPruneBound(lastToken, keep)
	if through == 0 {
		return nil
	}
	tx.d.ends.pruned(lock, through)
	return tx.write(qGrantsPruneLock, lock, through)
}

// GrantsPruneBatch is how many rows GrantsPruneEndedBefore looks at.
const GrantsPruneBatch = 256

// The first rows of grants_ended in sequence, a range of its key: no index
// on ended_at, whose entry every end would write (migration 00012). On
// PostgreSQL the batch's keys are an array, looked up through the key:
// with IN, a generic plan (a prepared statement's, after five runs) took
// the ended_at test for a third of the table and scanned it all, hashing
// the batch (TestGrantsPruneUsesKey).
var qGrantsPruneEndedBefore = perDialect("GrantsPruneEndedBefore", func(d dialect) string {
	first := `SELECT seq FROM grants_ended ORDER BY seq LIMIT ` + strconv.Itoa(GrantsPruneBatch)
	if _, ok := d.(postgresDialect); ok {
		return `DELETE FROM grants_ended WHERE seq = ANY(ARRAY(` + first + `)) AND ended_at < ?`
	}
	return `DELETE FROM grants_ended WHERE seq IN (` + first + `) AND ended_at < ?`
})

// GrantsPruneEndedBefore deletes, among the first GrantsPruneBatch rows of
// grants_ended in the order they were recorded, those of leases that ended
// before `before`, and reports how many it deleted. Rows are recorded in
// nearly the order they end (a lapse noticed late comes after later ends),
// so a row that ended before `before` but was recorded a batch or more
// after younger ones waits for them: it goes late, never early. Fewer than
// a batch means that the oldest rows are not all past `before`.
func GrantsPruneEndedBefore(tx *Tx, before int64) (int64, error) {
	n, err := tx.affected(qGrantsPruneEndedBefore, before)
	if n != 0 || err != nil {
		tx.d.ends.reset()
	}
	return n, err
}

// historyUnion reads the two places a grant's row can be in: each arm
// selects sel from one of them with where, in order, at most limit rows (no
// limit for ""), and the union is ordered and limited again. A live grant
// (leases) has no ended_at, ended or ended_after_token, which where may
// test as it would a live row of the old table.
func historyUnion(sel, where, order, limit string) string {
	live := `(SELECT lock, token, client, mode, granted_at, expires_at, CAST(NULL AS BIGINT) AS ended_at,
		CAST(NULL AS TEXT) AS ended, CAST(NULL AS BIGINT) AS ended_after_token FROM leases) g`
	return unionOf([]string{live, `grants_ended g`}, sel, where, order, limit)
}

func unionOf(froms []string, sel, where, order, limit string) string {
	tail := ``
	if order != "" {
		tail += ` ORDER BY ` + order
	}
	if limit != "" {
		tail += ` LIMIT ` + limit
	}
	var arms []string
	for i, from := range froms {
		arms = append(arms, `SELECT * FROM (SELECT `+sel+` FROM `+from+` WHERE `+where+tail+`) arm`+strconv.Itoa(i))
	}
	return strings.Join(arms, ` UNION ALL `) + tail
}

// grantColumns is the select list every history read scans (scanGrants).
const grantColumns = `lock, token, client, mode, granted_at, expires_at, ended_at, ended`

var (
	qGrantsOfLock   = portable("GrantsOfLock", historyUnion(grantColumns, `lock = ?1 AND token < ?2`, `token DESC`, `?3`))
	qGrantsOfClient = portable("GrantsOfClient", historyUnion(grantColumns, `client = ?1`,
		`granted_at DESC, lock DESC, token DESC`, `?2`))
	qGrantsOfClientAfter = portable("GrantsOfClient.after", historyUnion(grantColumns,
		`client = ?1 AND (granted_at, lock, token) < (?2, ?3, ?4)`, `granted_at DESC, lock DESC, token DESC`, `?5`))
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
