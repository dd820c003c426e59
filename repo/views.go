package repo

import (
	"database/sql"
	"strconv"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
)

// The reads an operation needs, each gathered in one statement: a statement's
// fixed cost is most of what a point lookup costs here.

// RequestState is what an acquire or release needs to know about a client
// and a lock before it decides.
type RequestState struct {
	Registered   bool
	WaitingFor   string  // "" when not waiting
	HoldsLock    bool    // the client holds a lease on the lock
	LockExists   bool    // the lock was ever acquired
	LastToken    int64   // the lock's fencing counter
	QueueLength  int64   // waiters on the lock
	LastPosition int64   // the lock's last queue position handed out
	HolderMode   lk.Mode // the lock's holders' mode, "" when none; read only when QueueLength is 0
}

// Numbered parameters: binding each text argument once is measurably
// cheaper. The CASEs skip lookups whose answer is known: an unregistered
// client waits for and holds nothing, and the holders' mode only matters
// when nobody is queued (SQLite runs a subquery only when reached). Every
// lookup is by key: nothing here reads the client's other leases, which
// may be tens of thousands (whether one of them is awaited is
// ClientAwaited's, asked only of a request that queues).
var qRequestStateGet = portable("RequestStateGet", `SELECT c.age,
		       CASE WHEN c.age IS NOT NULL THEN (SELECT lock FROM queue_entries WHERE client = ?1) END,
		       CASE WHEN c.age IS NOT NULL THEN EXISTS (SELECT 1 FROM leases WHERE lock = ?2 AND client = ?1) END,
		       k.last_token, k.queue_length, k.last_position,
		       CASE WHEN k.queue_length = 0 THEN (SELECT mode FROM leases WHERE lock = ?2 LIMIT 1) END
		  FROM (SELECT 1) AS one LEFT JOIN clients c ON c.name = ?1 LEFT JOIN locks k ON k.name = ?2`)

// RequestStateGet reads client's and lock's RequestState.
func RequestStateGet(tx *Tx, client, lock string) (RequestState, error) {
	st, _, err := requestState(tx, client, lock, false, 0, 0)
	return st, err
}

// RequestStateWithNext is RequestStateGet and, where the database
// pipelines, in the same round trip, the predecessors that an exclusive
// grant of lock's next token, made now, would have (GrantPredecessors),
// as that grant's pruning of the lock's history (keep tokens) leaves them,
// at most limit. next is nil where they were not read (SQLite, which pays
// no round trip for reading them once it grants, and nothing when it
// queues instead).
func RequestStateWithNext(tx *Tx, client, lock string, keep int64, limit int) (st RequestState, next *[]lk.Predecessor, err error) {
	return requestState(tx, client, lock, tx.d.dialect.pipelines(), keep, limit)
}

func requestState(tx *Tx, client, lock string, withNext bool, keep int64, limit int) (RequestState, *[]lk.Predecessor, error) {
	var st RequestState
	var age, lastToken, queueLength, lastPosition sql.NullInt64
	var waiting, holderMode sql.NullString
	var holdsLock sql.NullBool
	var found bool
	reads := []read{readRow(qRequestStateGet, []any{client, lock}, &found,
		&age, &waiting, &holdsLock, &lastToken, &queueLength, &lastPosition, &holderMode)}
	var next *[]lk.Predecessor
	if withNext {
		next = &[]lk.Predecessor{}
		reads = append(reads, nextPredecessorsRead(lock, keep, limit, next))
	}
	err := tx.reads(reads...)
	st.HoldsLock = holdsLock.Bool
	st.Registered, st.WaitingFor = age.Valid, waiting.String
	st.LockExists, st.LastToken = lastToken.Valid, lastToken.Int64
	st.QueueLength, st.LastPosition = queueLength.Int64, lastPosition.Int64
	st.HolderMode = lk.Mode(holderMode.String)
	if err != nil {
		next = nil
	}
	return st, next, err
}

var qLockView = portable("LockView", `SELECT 0 AS part, client, mode, token AS n, expires_at FROM leases WHERE lock = ?1
		UNION ALL
		SELECT 1, client, mode, position, 0 FROM queue_entries WHERE lock = ?1
		ORDER BY part, n`)

// LockView is a lock's holders by token and queue oldest first (S4), each
// waiter with its rank.
func LockView(tx *Tx, lock string) (lk.InspectResult, error) {
	var rows []struct {
		Part      int     `db:"part"`
		Client    string  `db:"client"`
		Mode      lk.Mode `db:"mode"`
		N         int64   `db:"n"`
		ExpiresAt int64   `db:"expires_at"`
	}
	err := tx.selectAll(&rows, qLockView, lock)
	in := lk.InspectResult{Lock: lock, Holders: []lk.Holder{}, Queue: []lk.Waiter{}}
	for _, r := range rows {
		if r.Part == 0 {
			in.Holders = append(in.Holders, lk.Holder{Client: r.Client, Mode: r.Mode, Token: r.N, ExpiresAt: r.ExpiresAt})
		} else {
			in.Queue = append(in.Queue, lk.Waiter{Client: r.Client, Mode: r.Mode, Position: int64(len(in.Queue) + 1)})
		}
	}
	return in, err
}

var (
	qInspectHolders = portable("InspectHolders", `SELECT client, mode, token, expires_at FROM leases
		 WHERE lock = ?1 AND token > ?2 ORDER BY token LIMIT ?3`)
	qInspectQueue = portable("InspectQueue", `SELECT client, mode, position FROM queue_entries
		 WHERE lock = ?1 AND position > ?2 ORDER BY position LIMIT ?3`)
	qInspectCounts = portable("InspectCounts", `SELECT (SELECT count(*) FROM leases WHERE lock = ?1),
		       COALESCE((SELECT queue_length FROM locks WHERE name = ?1), 0)`)
	// qQueueRankAt counts the entries up to entry number ?2 from the
	// nearer end of the queue, as qQueueRank does.
	qQueueRankAt = portable("QueueRankAt", `SELECT CASE
		  WHEN ?2 - COALESCE((SELECT h.position FROM queue_entries h WHERE h.lock = ?1 ORDER BY h.position LIMIT 1), ?2)
		       <= k.last_position - ?2
		  THEN (SELECT count(*) FROM queue_entries q WHERE q.lock = ?1 AND q.position <= ?2)
		  ELSE k.queue_length - (SELECT count(*) FROM queue_entries q WHERE q.lock = ?1 AND q.position > ?2)
		  END
		  FROM locks k WHERE k.name = ?1`)
)

// LockViewPage is a page of inspect's answer: at most limit of lock's
// holders by token after token afterToken, or, with inQueue, none, then
// its queue after entry number afterPosition (each waiter with its rank),
// holders and waiters together at most limit. The queue is read through
// its primary key from the cursor on; the holders are sorted by token
// from the lock's leases (leases has no index by token), but only a
// page of them is kept.
func LockViewPage(tx *Tx, lock string, inQueue bool, after int64, limit int) (lk.InspectResult, error) {
	in := lk.InspectResult{Lock: lock, Holders: []lk.Holder{}, Queue: []lk.Waiter{}}
	var holders, queueLength int64
	if _, err := tx.row(qInspectCounts, []any{lock}, &holders, &queueLength); err != nil {
		return in, err
	}
	in.HolderCount, in.QueueLength = &holders, &queueLength
	var from int64 // the queue's cursor
	if !inQueue {
		err := tx.each(qInspectHolders, []any{lock, after, limit + 1}, func(scan func(...any) error) error {
			var h lk.Holder
			err := scan(&h.Client, &h.Mode, &h.Token, &h.ExpiresAt)
			in.Holders = append(in.Holders, h)
			return err
		})
		if err != nil {
			return in, err
		}
		if len(in.Holders) > limit {
			in.Holders = in.Holders[:limit]
			next := "h:" + strconv.FormatInt(in.Holders[limit-1].Token, 10)
			in.Next = &next
			return in, nil
		}
	} else {
		from = after
	}
	left := limit - len(in.Holders)
	rank := int64(0) // the rank of the entry at from
	if from > 0 {
		if _, err := tx.row(qQueueRankAt, []any{lock, from}, &rank); err != nil {
			return in, err
		}
	}
	err := tx.each(qInspectQueue, []any{lock, from, left + 1}, func(scan func(...any) error) error {
		var w lk.Waiter
		var position int64
		err := scan(&w.Client, &w.Mode, &position)
		rank++
		w.Position = rank
		in.Queue = append(in.Queue, w)
		if len(in.Queue) <= left {
			from = position
		}
		return err
	})
	if len(in.Queue) > left {
		in.Queue = in.Queue[:left]
		next := "q:" + strconv.FormatInt(from, 10)
		in.Next = &next
	}
	return in, err
}

var qClientView = portable("ClientView", `SELECT c.age, q.lock AS waiting_for, l.lock, l.mode, l.token, l.expires_at
		  FROM clients c LEFT JOIN queue_entries q ON q.client = c.name LEFT JOIN leases l ON l.client = c.name
		 WHERE c.name = ? ORDER BY l.lock`)

// ClientView is status's answer for client (D6): age 0 when unregistered;
// the rank of its wait, when it waits and rank is asked for, is counted
// (QueueRank: the entries ahead).
func ClientView(tx *Tx, client string, rank bool) (lk.StatusResult, error) {
	var rows []struct {
		Age        int64          `db:"age"`
		WaitingFor sql.NullString `db:"waiting_for"`
		Lock       sql.NullString `db:"lock"`
		Mode       sql.NullString `db:"mode"`
		Token      sql.NullInt64  `db:"token"`
		ExpiresAt  sql.NullInt64  `db:"expires_at"`
	}
	err := tx.selectAll(&rows, qClientView, client)
	st := lk.StatusResult{Client: client, Holds: []lk.Holder{}}
	if err != nil {
		return st, err
	}
	for _, r := range rows {
		st.Age = r.Age
		if r.WaitingFor.Valid && st.Waiting == nil {
			st.Waiting = &lk.WaitingFor{Lock: r.WaitingFor.String}
		}
		if r.Lock.Valid {
			st.Holds = append(st.Holds, lk.Holder{Lock: r.Lock.String, Mode: lk.Mode(r.Mode.String),
				Token: r.Token.Int64, ExpiresAt: r.ExpiresAt.Int64})
		}
	}
	if st.Waiting != nil && rank {
		st.Waiting.Position, err = QueueRank(tx, client)
	}
	return st, err
}

// headQueuedAt is a locks page's column with when the first in line of
// the lock a.lock was queued: one lookup of the queue's primary key, the
// first position, whatever the queue's length.
const headQueuedAt = `(SELECT f.queued_at FROM queue_entries f WHERE f.lock = a.lock ORDER BY f.position LIMIT 1)`

// lockRow is a row of a locks page: a lock, and one of its holders when it
// has any, and whether the lock is unsettled.
type lockRow struct {
	Lock      string         `db:"lock"`
	Waiting   int64          `db:"waiting"`
	Unsettled bool           `db:"unsettled"`
	HeadSince sql.NullInt64  `db:"head_queued_at"`
	Client    sql.NullString `db:"client"`
	Mode      sql.NullString `db:"mode"`
	Token     sql.NullInt64  `db:"token"`
	ExpiresAt sql.NullInt64  `db:"expires_at"`
}

// lockPage gathers rows, by lock then token, into at most limit locks,
// each with its first lk.LockHoldersShown holders and their count,
// whose names start with prefix: more is true when a lock was left for the
// next page, unsettled when a lock of the page is. A waiter's wait is
// counted up to now.
func lockPage(rows []lockRow, prefix string, limit int, now int64) (page []lk.LockSummary, more, unsettled bool) {
	for _, r := range rows {
		if !strings.HasPrefix(r.Lock, prefix) {
			break
		}
		if len(page) == 0 || page[len(page)-1].Lock != r.Lock {
			if len(page) == limit {
				return page, true, unsettled
			}
			page = append(page, lk.LockSummary{Lock: r.Lock, Holders: []lk.Holder{}, Waiting: r.Waiting})
			if r.HeadSince.Valid {
				wait := max(now-r.HeadSince.Int64, 0)
				page[len(page)-1].OldestWaitS = &wait
			}
			unsettled = unsettled || r.Unsettled
		}
		if r.Client.Valid {
			last := &page[len(page)-1]
			// A page's size is bounded by its locks, not by what they hold:
			// the rest of a crowd of readers is counted, and paged by inspect.
			last.HolderCount++
			if len(last.Holders) == lk.LockHoldersShown {
				continue
			}
			last.Holders = append(last.Holders, lk.Holder{Client: r.Client.String, Mode: lk.Mode(r.Mode.String),
				Token: r.Token.Int64, ExpiresAt: r.ExpiresAt.Int64})
		}
	}
	return page, false, unsettled
}
