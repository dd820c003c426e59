package repo

import "strconv"

// WaitEdge is an edge of the wait-for graph (D2) found by WaitEdgesFrom, with
// what the deadlock resolution needs to know about its target.
type WaitEdge struct {
	From      string `db:"src"`
	To        string `db:"dst"`
	ToAge     int64  `db:"dst_age"`
	ToWaiting string `db:"dst_waiting"` // the lock To waits for, "" if none
}

// WaitEdgesFrom walks the wait-for graph from client with a recursive CTE and
// returns the edges it crossed: work bounded by what client can reach.
//
// D2 gives a waiter an edge to every holder of its lock and to every waiter
// ahead of it. The walk uses a sparser graph with the same reachability: a
// waiter points at the waiter just ahead of it, and the head of a queue at the
// lock's holders. Everyone ahead is then still reachable, through the chain,
// and no query ever touches every pair of waiters. The recursive term is a
// single SELECT, as PostgreSQL requires, and the parameters are given the
// collation of the name columns (the dialect's byteCollation), as PostgreSQL
// requires too.
func WaitEdgesFrom(tx *Tx, client string) ([]WaitEdge, error) {
	var es []WaitEdge
	err := tx.selectAll(&es, qWaitEdgesFrom, client)
	return es, err
}

var qWaitEdgesFrom = perDialect("WaitEdgesFrom", func(d dialect) string {
	return `WITH RECURSIVE walk(src, dst) AS (
		SELECT CAST(NULL AS TEXT) ` + d.byteCollation() + `, CAST(? AS TEXT) ` + d.byteCollation() + `
		UNION
		` + waitStep + `
	)
	` + waitEdges
})

// WaitEdgesBeforeQueueing is WaitEdgesFrom for a client about to join the end
// of lock's queue, walked before its queue entry is written: the walk starts
// from the edges that entry would have, to the waiter that will be just ahead
// of it or, with an empty queue, to the lock's holders. Nobody stands behind
// a new last entry, so the graph is otherwise the same, and a requester found
// to be the victim need never be queued.
func WaitEdgesBeforeQueueing(tx *Tx, client, lock string) ([]WaitEdge, error) {
	var es []WaitEdge
	err := tx.selectAll(&es, qWaitEdgesBeforeQueueing, client, lock)
	return es, err
}

var qWaitEdgesBeforeQueueing = perDialect("WaitEdgesBeforeQueueing", func(d dialect) string {
	return `WITH RECURSIVE walk(src, dst) AS (
		SELECT CAST(?1 AS TEXT) ` + d.byteCollation() + `, coalesce(tail.client, l.client)
		  FROM (SELECT 1) AS one
		  LEFT JOIN queue_entries tail ON tail.lock = ?2 AND tail.position = (
		       SELECT max(x.position) FROM queue_entries x WHERE x.lock = ?2)
		  LEFT JOIN leases l ON tail.client IS NULL AND l.lock = ?2
		 WHERE coalesce(tail.client, l.client) IS NOT NULL
		UNION
		` + waitStep + `
	)
	` + waitEdges
})

// waitStep is one step of the walk: a waiter's edge to the waiter just ahead
// of it or, at the head of its queue, to its lock's holders.
const waitStep = `SELECT q.client, coalesce(ahead.client, l.client)
		  FROM walk
		  JOIN queue_entries q ON q.client = walk.dst
		  LEFT JOIN queue_entries ahead ON ahead.lock = q.lock AND ahead.position = (
		       SELECT max(x.position) FROM queue_entries x WHERE x.lock = q.lock AND x.position < q.position)
		  LEFT JOIN leases l ON ahead.client IS NULL AND l.lock = q.lock
		 WHERE coalesce(ahead.client, l.client) IS NOT NULL`

// waitEdges turns the walk into WaitEdges.
const waitEdges = `SELECT walk.src, walk.dst, c.age AS dst_age, coalesce(w.lock, '') AS dst_waiting
	  FROM walk JOIN clients c ON c.name = walk.dst LEFT JOIN queue_entries w ON w.client = walk.dst
	 WHERE walk.src IS NOT NULL`

var qLockHoldersWaiting = portable("LockHoldersWaiting", `SELECT 1 FROM leases l WHERE l.lock = ?
		AND EXISTS (SELECT 1 FROM queue_entries w WHERE w.client = l.client) LIMIT 1`)

// LockHoldersWaiting reports whether some holder of lock waits for a lock.
// Everything a waiter on lock can reach in the wait-for graph, it reaches
// through the lock's holders, so without such a holder no cycle runs through
// a waiter on lock.
func LockHoldersWaiting(tx *Tx, lock string) (bool, error) {
	var one int
	return tx.row(qLockHoldersWaiting, []any{lock}, &one)
}

// awaitedScan is how many of a client's leases ClientAwaited looks at.
const awaitedScan = 16

var qClientAwaited = portable("ClientAwaited", `SELECT count(*),
		       coalesce(max(CASE WHEN EXISTS (SELECT 1 FROM queue_entries q WHERE q.lock = h.lock) THEN 1 ELSE 0 END), 0)
		  FROM (SELECT lock FROM leases WHERE client = ?1 LIMIT `+strconv.Itoa(awaitedScan+1)+`) AS h`)

// ClientAwaited reports whether somebody may be queued for a lock that
// client holds: without such an edge into client, no wait cycle runs through
// it. It looks at awaitedScan of the client's leases at most, and answers
// true, without looking further, for a client that holds more: the check
// is only a shortcut past the walk, which decides, and a client holding tens
// of thousands of locks must not pay for every one of them at each queued
// acquire.
func ClientAwaited(tx *Tx, client string) (bool, error) {
	var held, awaited int64
	_, err := tx.row(qClientAwaited, []any{client}, &held, &awaited)
	return isAwaited(held, awaited), err
}

// isAwaited is ClientAwaited's answer from its statement's columns.
func isAwaited(held, awaited int64) bool { return held > awaitedScan || awaited == 1 }
