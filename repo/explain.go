package repo

// The reads and writes of answers that say why (docs/api.md): a grant's
// predecessors and a lock's recent hold times from the grants table, and
// the aborts table (migrations/sqlite/00005_explain.sql). Every read here
// is a range of an index bounded by what it returns, or by a small limit:
// none reads a lock's whole history.

import (
	"database/sql"
	"encoding/json"

	lk "github.com/leasekeeper/leasekeeper"
)

// The reads below that read both places of the history (repo/grants.go)
// do so in one statement, each place through an index, combined by max()
// or EXISTS, not by an ordered union: SQLite sorted such a union's arms
// again (it cannot tell that a subquery keeps its index's order), at about
// four times the cost. The ones that read grants_ended alone take its
// index's order as it comes, but for two (endedAfter, GrantHoldTimes),
// unions of two of its indexes whose arms are each limited to the rows
// the read returns, a sort of a few rows. Their arms rely on a lock's
// tokens being its own: one ended row per token.
var (
	// The last grant before token that is not a reader of token's
	// hand-over: one granted before at, an exclusive one, or one that had
	// ended before token was granted. In each place, a walk down the
	// lock's tokens from token, as long as the run of readers granted
	// together; the greater of the two.
	qGrantBeforeRun = perDialect("GrantBeforeRun", func(d dialect) string {
		return `SELECT max(token) FROM (SELECT * FROM (SELECT token FROM leases ` + d.indexedBy("leases_by_token") + `
			WHERE lock = ?1 AND token < ?2 AND (granted_at <> ?3 OR mode <> 'shared') ORDER BY token DESC LIMIT 1) l
		UNION ALL SELECT * FROM (SELECT token FROM grants_ended ` + d.indexedBy("grants_ended_by_lock") + `
			WHERE lock = ?1 AND token < ?2 AND (granted_at <> ?3 OR mode <> 'shared' OR ended_after_token < ?2)
			ORDER BY token DESC LIMIT 1) e) u`
	})
	// A holder still live when token was granted: a lease live now with an
	// older token, or one that ended after token was granted (which ended
	// after a token other than its own: a row of the index in end order).
	qGrantJoinedLive = perDialect("GrantJoinedLive", func(d dialect) string {
		return `SELECT CASE WHEN EXISTS (SELECT 1 FROM leases WHERE lock = ?1 AND token < ?2)
			OR EXISTS (SELECT 1 FROM ` + endedByLockOrder(d) + ` WHERE lock = ?1 AND ended_after_token >= ?2 AND token < ?2
				AND ` + inEndOrder + `)
			THEN 1 ELSE 0 END`
	})
	// The leases of the lock that ended while ?2 was its last token, in
	// the order they ended: those with older tokens, from the index in end
	// order, and ?2's own, by its token.
	qGrantsEndedAfter = perDialect("GrantsEndedAfter", func(d dialect) string {
		return endedAfter(d, `?2`, `TRUE`)
	})
	// GrantsEndedAfter for the lock's last token, read in the statement,
	// and without the rows that the grant of the next token prunes (?2
	// tokens kept, in steps of ?4): the predecessors an exclusive grant of
	// the next token would have (RequestStateWithNext).
	qNextPredecessors = perDialect("NextPredecessors", func(d dialect) string {
		return endedAfter(d, lastTokenRead, nextKept)
	})
)

// inEndOrder is the condition of grants_ended_by_lock_order (migration
// 00014): a row ended after a token other than its own. Most end while
// their token is the lock's last (every exclusive lease, and a reader
// alone), and the index by lock and token holds those in end order
// already; an end writes an entry here only for a reader that outlived
// the grant of a later token, or a waiter's grant found lapsed during a
// hand-over that granted a later token before its expiry. A read of the
// index states the condition, without which neither database
// takes a partial index.
const inEndOrder = `ended_after_token <> token`

// endedAfter reads the lock's (?1) ends while after was its last token,
// kept (a condition on token), in end order, at most ?3: the older tokens'
// through the index in end order, after's own through its token, at most
// one row. Each arm is limited, so that the union sorts at most ?3 + 1
// rows.
func endedAfter(d dialect, after, kept string) string {
	return `SELECT token, client, mode, ended_at, ended FROM (
			SELECT * FROM (SELECT token, client, mode, ended_at, ended FROM ` + endedByLockOrder(d) + `
				WHERE lock = ?1 AND ended_after_token = ` + after + ` AND token < ` + after + ` AND ` + inEndOrder + `
				AND ` + kept + ` ORDER BY ended_at, token LIMIT ?3) o
			UNION ALL
			SELECT token, client, mode, ended_at, ended FROM grants_ended ` + d.indexedBy("grants_ended_by_lock") + `
				WHERE lock = ?1 AND token = ` + after + ` AND ended_after_token = token AND ` + kept + `) u
		ORDER BY ended_at, token LIMIT ?3`
}

// nextPredecessorsRead is NextPredecessors' read for lock (keep tokens
// kept, at most limit), into next.
func nextPredecessorsRead(lock string, keep int64, limit int, next *[]lk.Predecessor) read {
	return read{q: qNextPredecessors, args: nextPredecessorsArgs(lock, keep, limit), fn: collectPredecessors(next)}
}

// nextPredecessorsArgs are NextPredecessors' arguments: the lock, the
// tokens kept, the limit and the pruning's step (historyPruneStep).
func nextPredecessorsArgs(lock string, keep int64, limit int) []any {
	return []any{lock, keep, limit, historyPruneStep(keep)}
}

// nextKept keeps NextPredecessors' rows above the bound that the next
// token's grant prunes to, historyPruneBound written out in SQL (integer
// division, which truncates in both databases, as in Go).
const (
	lastTokenRead = `(SELECT last_token FROM locks WHERE name = ?1)`
	nextKept      = `token > CASE WHEN ` + lastTokenRead + ` + 1 <= CAST(?2 AS BIGINT) THEN 0
			ELSE (` + lastTokenRead + ` + 1 - CAST(?2 AS BIGINT)) / CAST(?4 AS BIGINT) * CAST(?4 AS BIGINT) END`
)

// endedByLockOrder names grants_ended for a range of
// grants_ended_by_lock_order: SQLite, which might take
// grants_ended_by_lock for the lock, and walk its whole history, is told.
func endedByLockOrder(d dialect) string {
	return `grants_ended ` + d.indexedBy("grants_ended_by_lock_order")
}

// GrantPredecessors returns the predecessors of the grant of lock's token,
// made at instant at in mode (docs/api.md, "Answers that say why"): the
// leases of the lock that ended while token-1 was its last token (each
// ended grant's row records, as ended_after_token, the lock's last token
// when it ended), oldest end first, at most limit. A reader granted
// together with the readers just before it (at the same instant, they
// still live) has those of the first of them, B: the ends that made the
// hand-over possible. None when a lease older than B was still live at B's
// grant (a reader that joined live readers waited for nobody), for a
// lock's first grant, and when history no longer keeps them. It walks down
// the lock's tokens through the run of readers, and reads the rows it
// returns through the indexes in end order.
func GrantPredecessors(tx *Tx, lock string, token, at int64, mode lk.Mode, limit int) ([]lk.Predecessor, error) {
	if mode == lk.Exclusive {
		if ps, ok := tx.d.ends.predecessors(lock, token-1, limit); ok {
			if verifyEnds == nil {
				return ps, nil
			}
			var read []lk.Predecessor
			err := tx.each(qGrantsEndedAfter, []any{lock, token - 1, limit}, collectPredecessors(&read))
			verifyEnds(lock, token, ps, read)
			return read, err
		}
	}
	first := token
	if mode == lk.Shared {
		var before sql.NullInt64
		if _, err := tx.row(qGrantBeforeRun, []any{lock, token, at}, &before); err != nil {
			return nil, err
		}
		if !before.Valid {
			return nil, nil // the lock's first grants, or history dropped the rest
		}
		first = before.Int64 + 1
		var live int64
		if _, err := tx.row(qGrantJoinedLive, []any{lock, first}, &live); err != nil || live == 1 {
			return nil, err
		}
	}
	var out []lk.Predecessor
	err := tx.each(qGrantsEndedAfter, []any{lock, first - 1, limit}, collectPredecessors(&out))
	return out, err
}

// collectPredecessors scans GrantsEndedAfter's rows into out.
func collectPredecessors(out *[]lk.Predecessor) func(scan func(...any) error) error {
	return func(scan func(...any) error) error {
		var p lk.Predecessor
		var c string
		if err := scan(&p.Token, &c, &p.Mode, &p.EndedAt, &p.Ended); err != nil {
			return err
		}
		p.Client = &c
		*out = append(*out, p)
		return nil
	}
}

// The last leases of a lock to end, by the token they ended after, then
// ended_at, then token: their order of end, but for a lapse noticed late,
// which an estimate can take. The token makes the order total, so that
// the rows are the same whatever the plan, and the SQLite writer's kept
// ones (ends.go) can be them. Rows ended before migration 00005 have no
// ended_after_token and no place in that order; PostgreSQL would sort them
// first.
//
// The ends after another token than their own come from the index in end
// order (o), those after their own from the index by token (t). The last
// ?2 of o end after tokens down to m; an end of t after a token below m
// cannot be among the last ?2, and t's walk from the lock's last token
// down to m passes at most ?2 rows of o (those after tokens above m are
// all among o's ?2). When o holds fewer than ?2, t's walk passes fewer
// than ?2 of them, and rows of t are read until there are ?2.
var qGrantHoldTimes = perDialect("GrantHoldTimes", func(d dialect) string {
	return `WITH o AS (SELECT mode, ended_at - granted_at AS held, ended_after_token AS after, ended_at, token
			FROM ` + endedByLockOrder(d) + ` WHERE lock = ?1 AND ended_after_token IS NOT NULL AND ` + inEndOrder + `
			ORDER BY ended_after_token DESC, ended_at DESC, token DESC LIMIT ?2),
		m AS (SELECT CASE WHEN count(*) < ?2 THEN 0 ELSE min(after) END AS after FROM o),
		t AS (SELECT mode, ended_at - granted_at AS held, ended_after_token AS after, ended_at, token
			FROM grants_ended ` + d.indexedBy("grants_ended_by_lock") + `
			WHERE lock = ?1 AND token >= (SELECT after FROM m) AND ended_after_token = token
			ORDER BY token DESC LIMIT ?2)
		SELECT mode, held, after, ended_at, token FROM (SELECT * FROM o UNION ALL SELECT * FROM t) u
			ORDER BY after DESC, ended_at DESC, token DESC LIMIT ?2`
})

// HoldTime is how long one ended lease was held.
type HoldTime struct {
	Mode lk.Mode
	Held int64
}

// holdEnd is a HoldTime and where its end stands in the lock's end order.
type holdEnd struct {
	HoldTime
	after, endedAt, token int64
}

// GrantHoldTimes returns how long the last limit leases of lock to end
// were held, latest end first; on SQLite, from what the writer kept when
// it can (ends.go).
func GrantHoldTimes(tx *Tx, lock string, limit int) ([]HoldTime, error) {
	kept, ok, answers := tx.keptHolds(lock, limit)
	if answers {
		return holdTimes(kept), nil
	}
	var read []holdEnd
	r := grantHoldTimesRead(lock, limit, &read)
	if err := tx.each(r.q, r.args, r.fn); err != nil {
		return nil, err
	}
	tx.keepHolds(lock, limit, kept, ok, read)
	return holdTimes(read), nil
}

// holdTimes returns the hold times of hs.
func holdTimes(hs []holdEnd) []HoldTime {
	if hs == nil {
		return nil
	}
	out := make([]HoldTime, len(hs))
	for i, h := range hs {
		out[i] = h.HoldTime
	}
	return out
}

// keptHolds returns what the writer kept of lock's last limit hold
// times, whether it knew them (ok), and whether they answer without a
// read: a test that verifies them has them read all the same.
func (tx *Tx) keptHolds(lock string, limit int) (kept []holdEnd, ok, answers bool) {
	kept, ok = tx.d.ends.holdTimes(lock, limit)
	return kept, ok, ok && verifyHolds == nil
}

// keepHolds hands the hold times read to the writer's kept ones: to
// check them against (tests), or to start from.
func (tx *Tx) keepHolds(lock string, limit int, kept []holdEnd, ok bool, read []holdEnd) {
	if ok {
		verifyHolds(lock, kept, read)
		return
	}
	tx.d.ends.readHolds(lock, limit, read)
}

func grantHoldTimesRead(lock string, limit int, out *[]holdEnd) read {
	return read{q: qGrantHoldTimes, args: []any{lock, limit}, fn: func(scan func(...any) error) error {
		var h holdEnd
		if err := scan(&h.Mode, &h.Held, &h.after, &h.endedAt, &h.token); err != nil {
			return err
		}
		*out = append(*out, h)
		return nil
	}}
}

var qLockHoldersByMode = portable("LockHoldersByMode", `SELECT mode, max(granted_at), max(expires_at) FROM leases
		WHERE lock = ? GROUP BY mode`)

// HoldersByMode sums up a lock's holders of one mode: the latest start and
// the latest expiry among them.
type HoldersByMode struct {
	Mode          lk.Mode
	LastGrantedAt int64
	LastExpiresAt int64
}

// LockHoldersByMode sums up lock's holders by mode (a lock's holders share
// one mode, but a read apart may see a lapsed one beside its successor).
func LockHoldersByMode(tx *Tx, lock string) ([]HoldersByMode, error) {
	var out []HoldersByMode
	r := lockHoldersByModeRead(lock, &out)
	err := tx.each(r.q, r.args, r.fn)
	return out, err
}

func lockHoldersByModeRead(lock string, out *[]HoldersByMode) read {
	return read{q: qLockHoldersByMode, args: []any{lock}, fn: func(scan func(...any) error) error {
		var h HoldersByMode
		if err := scan(&h.Mode, &h.LastGrantedAt, &h.LastExpiresAt); err != nil {
			return err
		}
		*out = append(*out, h)
		return nil
	}}
}

var qQueueModesThrough = portable("QueueModesThrough", `SELECT q.mode FROM queue_entries me
		JOIN queue_entries q ON q.lock = me.lock AND q.position <= me.position
		WHERE me.client = ?1 ORDER BY q.position LIMIT ?2`)

// QueueModesThrough returns the modes of the entries of the queue client
// waits in, from the head through client's own, but no more than limit of
// them: empty when it waits for nothing.
func QueueModesThrough(tx *Tx, client string, limit int) ([]lk.Mode, error) {
	var out []lk.Mode
	err := tx.each(qQueueModesThrough, []any{client, limit}, func(scan func(...any) error) error {
		var m lk.Mode
		if err := scan(&m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

var qQueueModesHead = portable("QueueModesHead", `SELECT mode FROM queue_entries
		WHERE lock = ?1 ORDER BY position LIMIT ?2`)

// QueueModesHead returns the modes of the first limit entries of lock's
// queue, from its head.
func QueueModesHead(tx *Tx, lock string, limit int) ([]lk.Mode, error) {
	var out []lk.Mode
	r := queueModesHeadRead(lock, limit, &out)
	err := tx.each(r.q, r.args, r.fn)
	return out, err
}

func queueModesHeadRead(lock string, limit int, out *[]lk.Mode) read {
	return read{q: qQueueModesHead, args: []any{lock, limit}, fn: func(scan func(...any) error) error {
		var m lk.Mode
		err := scan(&m)
		*out = append(*out, m)
		return err
	}}
}

// QueueingReads is what an acquire reads on its way into a queue
// (ReadForQueueing).
type QueueingReads struct {
	Awaited bool            // ClientAwaited's answer; false where not read
	Modes   []lk.Mode       // QueueModesHead's: the waiters ahead of it
	Holds   []HoldTime      // GrantHoldTimes'
	Holders []HoldersByMode // LockHoldersByMode's
}

// ReadForQueueing reads what an acquire of lock by client that is about
// to queue reads, in one round trip where the database pipelines rather
// than one each: with awaited, whether somebody may wait for a lock client
// holds (ClientAwaited, the deadlock check's shortcut); with estimate, what
// the estimate of its wait takes, read before its entry is written: the
// modes of the first limit entries of lock's queue, its last holdSample
// hold times and its holders by mode.
func ReadForQueueing(tx *Tx, client, lock string, awaited, estimate bool, limit, holdSample int) (QueueingReads, error) {
	var out QueueingReads
	var rs []read
	var held, waitedFor int64
	if awaited {
		var found bool
		rs = append(rs, readRow(qClientAwaited, []any{client}, &found, &held, &waitedFor))
	}
	var kept, read []holdEnd
	var holdsKept, answered bool
	if estimate {
		rs = append(rs, queueModesHeadRead(lock, limit, &out.Modes), lockHoldersByModeRead(lock, &out.Holders))
		kept, holdsKept, answered = tx.keptHolds(lock, holdSample)
		if answered {
			out.Holds = holdTimes(kept)
		} else {
			rs = append(rs, grantHoldTimesRead(lock, holdSample, &read))
		}
	}
	if len(rs) == 0 {
		return out, nil
	}
	if err := tx.reads(rs...); err != nil {
		return out, err
	}
	if estimate && !answered {
		tx.keepHolds(lock, holdSample, kept, holdsKept, read)
		out.Holds = holdTimes(read)
	}
	out.Awaited = awaited && isAwaited(held, waitedFor)
	return out, nil
}

// AbortRow is one row of the aborts table.
type AbortRow struct {
	Client    string
	Age       int64
	AbortedAt int64
	Requester string
	Lock      string // the lock it waited for, "" for none
	Cycle     []lk.CycleMember
}

var qAbortInsert = portable("AbortInsert", `INSERT INTO aborts (client, age, aborted_at, requester, lock, cycle)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (client, age) DO NOTHING`)

// AbortInsert records a deadlock victim.
func AbortInsert(tx *Tx, a AbortRow) error {
	cycle, err := json.Marshal(a.Cycle)
	if err != nil {
		return err
	}
	err = tx.write(qAbortInsert, a.Client, a.Age, a.AbortedAt, a.Requester, a.Lock, string(cycle))
	return err
}

var qAbortLatest = portable("AbortLatest", `SELECT age, aborted_at, requester, lock, cycle FROM aborts
		WHERE client = ? ORDER BY age DESC LIMIT 1`)

// AbortLatest returns client's last abort; found is false when history
// keeps none.
func AbortLatest(tx *Tx, client string) (a AbortRow, found bool, err error) {
	var cycle string
	a.Client = client
	found, err = tx.row(qAbortLatest, []any{client}, &a.Age, &a.AbortedAt, &a.Requester, &a.Lock, &cycle)
	if err != nil || !found {
		return a, found, err
	}
	return a, true, json.Unmarshal([]byte(cycle), &a.Cycle)
}

var qAbortsPruneBefore = portable("AbortsPruneBefore", `DELETE FROM aborts WHERE (client, age) IN
		(SELECT client, age FROM aborts WHERE aborted_at < ? ORDER BY aborted_at LIMIT ?)`)

// AbortsPruneBefore deletes up to limit aborts older than before, oldest
// first, through aborts_by_time, and reports how many it deleted.
func AbortsPruneBefore(tx *Tx, before int64, limit int) (int64, error) {
	return tx.affected(qAbortsPruneBefore, before, limit)
}

var qGrantLostInAbort = portable("GrantLostInAbort", `SELECT count(*) FROM grants_ended
	WHERE client = ?1 AND lock = ?2 AND granted_at <= ?3 AND ended = 'aborted' AND ended_at = ?3`)

// GrantLostInAbort reports whether client's lease on lock ended in its
// abort at instant at: a range of client's grants (grants_ended_by_client).
func GrantLostInAbort(tx *Tx, client, lock string, at int64) (bool, error) {
	n, _, err := tx.rowInt(qGrantLostInAbort, client, lock, at)
	return n > 0, err
}

var qGrantGet = portable("GrantGet", historyUnion(`client, mode, granted_at, expires_at`, `lock = ?1 AND token = ?2`, ``, `1`))

// GrantGet returns the grant of lock's token, as a lease (its expiry the
// last known); found is false when history does not keep it.
func GrantGet(tx *Tx, lock string, token int64) (l LeaseRow, found bool, err error) {
	l.Lock, l.Token = lock, token
	found, err = tx.row(qGrantGet, []any{lock, token}, &l.Client, &l.Mode, &l.GrantedAt, &l.ExpiresAt)
	return l, found, err
}
