package repo

// WaitEdge is an edge of the wait-for graph (D2) found by WaitEdgesFrom.
type WaitEdge struct {
	From  string `db:"src"`
	To    string `db:"dst"`
	ToAge int64  `db:"dst_age"`
}

// WaitEdgesFrom walks the wait-for graph from client with a recursive CTE and
// returns the edges it crossed: work bounded by what client can reach.
//
// D2 gives a waiter an edge to every holder of its lock and to every waiter
// ahead of it. The walk uses a sparser graph with the same reachability: a
// waiter points at the waiter just ahead of it, and the head of a queue at the
// lock's holders. Everyone ahead is then still reachable, through the chain,
// and no query ever touches every pair of waiters.
func WaitEdgesFrom(tx *Tx, client string) ([]WaitEdge, error) {
	var es []WaitEdge
	err := tx.selectAll(&es, `WITH RECURSIVE walk(src, dst) AS (
		SELECT NULL, ?
		UNION
		SELECT q.client, ahead.client
		  FROM walk
		  JOIN queue_entries q ON q.client = walk.dst
		  JOIN queue_entries ahead ON ahead.lock = q.lock AND ahead.position = (
		       SELECT max(x.position) FROM queue_entries x WHERE x.lock = q.lock AND x.position < q.position)
		UNION
		SELECT q.client, l.client
		  FROM walk
		  JOIN queue_entries q ON q.client = walk.dst
		  JOIN leases l ON l.lock = q.lock
		 WHERE NOT EXISTS (SELECT 1 FROM queue_entries x WHERE x.lock = q.lock AND x.position < q.position)
	)
	SELECT walk.src, walk.dst, c.age AS dst_age
	  FROM walk JOIN clients c ON c.name = walk.dst
	 WHERE walk.src IS NOT NULL`, client)
	return es, err
}
