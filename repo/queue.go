package repo

import (
	"database/sql"

	lk "github.com/leasekeeper/leasekeeper"
)

// QueueEntry is one row of queue_entries.
type QueueEntry struct {
	Lock     string  `db:"lock"`
	Position int64   `db:"position"`
	Client   string  `db:"client"`
	Mode     lk.Mode `db:"mode"`
	TTL      int64   `db:"ttl"`
	QueuedAt int64   `db:"queued_at"`
}

var qQueueAppend = portable("QueueAppend", `INSERT INTO queue_entries (lock, position, client, mode, ttl, queued_at)
		VALUES (?, ?, ?, ?, ?, ?)`)

// QueueAppend stores a waiter; its position must be the lock's last_position
// after LockEnqueue.
func QueueAppend(tx *Tx, e QueueEntry) error {
	err := tx.write(qQueueAppend, e.Lock, e.Position, e.Client, e.Mode, e.TTL, e.QueuedAt)
	return err
}

// QueueHead is a queue entry with what S3 needs about its lock.
type QueueHead struct {
	QueueEntry
	LastToken int64   // the lock's fencing counter
	Staying   lk.Mode // mode of the lock's holders whose leases end after QueuePage's `outlasting`; "" if none
}

var qQueuePage = portable("QueuePage", `SELECT q.position, q.client, q.mode, q.ttl, q.queued_at, k.last_token,
		       (SELECT mode FROM leases WHERE lock = ?1 AND expires_at > ?4 LIMIT 1)
		  FROM queue_entries q JOIN locks k ON k.name = q.lock
		 WHERE q.lock = ?1 AND q.position > ?2 ORDER BY q.position LIMIT ?3`)

// QueuePage returns up to limit of lock's waiters after position `from`,
// oldest first: the queue read from its head, as S3 consumes it. Each row
// also carries the lock's counter and the mode of its holders whose leases
// end after `outlasting` (one row tells the mode: holders are one exclusive
// lease or only shared ones, S1).
func QueuePage(tx *Tx, lock string, from int64, limit int, outlasting int64) ([]QueueHead, error) {
	var page []QueueHead
	r := queuePageRead(lock, from, limit, outlasting, &page)
	err := tx.each(r.q, r.args, r.fn)
	return page, err
}

// QueuePageWithNext is QueuePage and, where the database pipelines, in the
// same round trip, the predecessors that an exclusive grant of lock's next
// token would have, as that grant's pruning of the lock's history (keep
// tokens) leaves them, at most predLimit (RequestStateWithNext's). next is
// nil where they were not read.
func QueuePageWithNext(tx *Tx, lock string, from int64, limit int, outlasting int64, keep int64, predLimit int) (page []QueueHead, next *[]lk.Predecessor, err error) {
	rs := []read{queuePageRead(lock, from, limit, outlasting, &page)}
	if tx.d.dialect.pipelines() {
		next = &[]lk.Predecessor{}
		rs = append(rs, nextPredecessorsRead(lock, keep, predLimit, next))
	}
	if err := tx.reads(rs...); err != nil {
		return nil, nil, err
	}
	return page, next, nil
}

// queuePageRead is QueuePage's read, into page. Scanned by hand: this runs
// on every release, and most pages hold one row.
func queuePageRead(lock string, from int64, limit int, outlasting int64, page *[]QueueHead) read {
	return read{q: qQueuePage, args: []any{lock, from, limit, outlasting}, fn: func(scan func(...any) error) error {
		h := QueueHead{QueueEntry: QueueEntry{Lock: lock}}
		var staying sql.NullString
		err := scan(&h.Position, &h.Client, &h.Mode, &h.TTL, &h.QueuedAt, &h.LastToken, &staying)
		h.Staying = lk.Mode(staying.String)
		*page = append(*page, h)
		return err
	}}
}

var (
	qQueueGrantThrough        = portable("QueueGrantThrough", `DELETE FROM queue_entries WHERE lock = ? AND position <= ?`)
	qQueueGrantThroughCounter = portable("QueueGrantThrough.counter", `UPDATE locks
		SET last_token = last_token + ?, queue_length = queue_length - ? WHERE name = ?`)
)

// QueueGrantThrough records that lock's first `granted` waiters, the entries
// up to position `through`, became holders: they leave the queue, and the
// lock's counter moves past their tokens, to last. waiters are their
// clients.
func QueueGrantThrough(tx *Tx, lock string, through, granted, last int64, waiters []string) error {
	tx.d.ends.issued(lock, last, granted)
	var err error
	if int64(len(waiters)) == granted {
		err = tx.writeAbout(lock, waiters, qQueueGrantThrough, lock, through)
	} else {
		err = tx.write(qQueueGrantThrough, lock, through) // drops every read kept
	}
	if err != nil {
		return err
	}
	return tx.write(qQueueGrantThroughCounter, granted, granted, lock)
}

// qQueueRank counts from whichever end of the queue is nearer to the
// client's entry: its position against the head's (one lookup of the
// primary key) and the lock's last position bound how many entries lie on
// each side, and queue_length less the entries behind is the rank. So a
// waiter near either end, as a fresh one and exec's polls of it are, costs
// what lies between it and that end, whatever the queue's length.
var qQueueRank = portable("QueueRank", `SELECT CASE
		  WHEN me.position - (SELECT h.position FROM queue_entries h WHERE h.lock = me.lock ORDER BY h.position LIMIT 1)
		       <= k.last_position - me.position
		  THEN (SELECT count(*) FROM queue_entries q WHERE q.lock = me.lock AND q.position <= me.position)
		  ELSE k.queue_length - (SELECT count(*) FROM queue_entries q WHERE q.lock = me.lock AND q.position > me.position)
		  END
		  FROM queue_entries me JOIN locks k ON k.name = me.lock WHERE me.client = ?`)

// QueueRank returns client's place in line on the lock it waits for (1 = next),
// 0 when it waits for nothing. It counts the entries between the client's
// and the nearer end of the queue, so a waiter deep in the middle of a long
// queue still costs what lies on one side of it; a fresh waiter's rank is its
// lock's queue length, and needs no count.
func QueueRank(tx *Tx, client string) (rank int64, err error) {
	_, err = tx.row(qQueueRank, []any{client}, &rank)
	return rank, err
}
