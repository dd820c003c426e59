package repo

import (
	"database/sql"
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
)

// The reads of the operator console: a page of a lock's fenced store, and
// the wait-for graph around a lock or a client.

var (
	qStoreFence = portable("StoreFence", `SELECT highest_token, key_count FROM store_fences WHERE lock = ?`)
	qStorePage  = portable("StorePage", `SELECT key, token, written_at, octet_length(value) AS value_bytes
		  FROM store_values WHERE lock = ?1 AND key > ?2 ORDER BY key LIMIT ?3`)
)

// StorePage returns lock's fence (nil when the store never accepted a write
// for it), its key count, and at most limit of its keys after `after` in
// key order; more is true when a next page has some. It reads the store's
// primary key from `after` on: a page costs what it shows.
func StorePage(tx *Tx, lock, after string, limit int) (highest *int64, keys int64, page []lk.StoreKey, more bool, err error) {
	var h sql.NullInt64
	if _, err = tx.row(qStoreFence, []any{lock}, &h, &keys); err != nil {
		return nil, 0, nil, false, err
	}
	if h.Valid {
		highest = &h.Int64
	}
	page = []lk.StoreKey{}
	if err = tx.selectAll(&page, qStorePage, lock, after, int64(limit)+1); err != nil {
		return nil, 0, nil, false, err
	}
	if len(page) > limit {
		page, more = page[:limit], true
	}
	return highest, keys, page, more, nil
}

var (
	qGraphLock    = portable("GraphLock", `SELECT queue_length FROM locks WHERE name = ?`)
	qGraphHolders = portable("GraphHolders", `SELECT client, mode, token, expires_at FROM leases
		 WHERE lock = ?1 ORDER BY token LIMIT ?2`)
	qGraphQueue = portable("GraphQueue", `SELECT client, mode, queued_at FROM queue_entries
		 WHERE lock = ?1 ORDER BY position LIMIT ?2`)
	qGraphClient = portable("GraphClient", `SELECT age FROM clients WHERE name = ?`)
	qGraphHolds  = portable("GraphHolds", `SELECT lock, mode, token, expires_at FROM leases
		 WHERE client = ?1 AND expires_at > ?2 ORDER BY lock LIMIT ?3`)
	qGraphWait = portable("GraphWait", `SELECT lock, mode, queued_at FROM queue_entries WHERE client = ?`)
)

// ErrGraphUnsettled is Graph's error when a lock it reached has waiters
// and a lease that ended by now but is not retired yet: the retirement
// hands the lock over, which only a write transaction at now can tell.
var ErrGraphUnsettled = errors.New("repo: a lock of the graph has a lapsed lease not yet retired")

// Graph walks the wait-for graph from a lock (lock != "") or a client,
// breadth first, across both kinds of edges, and returns the connected
// component it reaches, up to maxNodes locks and clients: cut is true when
// there were more. Every step is a lookup of a primary key or of
// leases_by_client, limited to the nodes still to be had, so a walk costs
// what it shows (at most maxNodes lookups of maxNodes+1 rows each), however
// large the component or the database.
func Graph(tx *Tx, lock, client string, maxNodes int, now int64) (lk.GraphResult, error) {
	g := lk.GraphResult{Locks: []lk.GraphLock{}, Clients: []lk.GraphClient{}, Holds: []lk.Holder{}, Waits: []lk.GraphWait{}}
	type node struct {
		lock bool
		name string
	}
	seen := map[node]bool{}
	edges := map[[2]string]bool{} // (lock, client): a client holds or waits for a lock, not both (L8)
	var todo []node
	// add makes n a node of the graph, when there is room; it reports
	// whether n is one.
	add := func(n node) bool {
		if seen[n] {
			return true
		}
		if len(seen) >= maxNodes {
			g.Cut = true
			return false
		}
		seen[n] = true
		todo = append(todo, n)
		return true
	}
	hold := func(h lk.Holder) {
		if add(node{true, h.Lock}) && add(node{false, h.Client}) && !edges[[2]string{h.Lock, h.Client}] {
			edges[[2]string{h.Lock, h.Client}] = true
			g.Holds = append(g.Holds, h)
		}
	}
	wait := func(w lk.GraphWait) {
		if add(node{true, w.Lock}) && add(node{false, w.Client}) && !edges[[2]string{w.Lock, w.Client}] {
			edges[[2]string{w.Lock, w.Client}] = true
			g.Waits = append(g.Waits, w)
		}
	}
	add(node{lock != "", lock + client})
	limit := int64(maxNodes) + 1
	for i := 0; i < len(todo); i++ {
		n := todo[i]
		if n.lock {
			var waiting int64
			if _, err := tx.row(qGraphLock, []any{n.name}, &waiting); err != nil {
				return g, err
			}
			g.Locks = append(g.Locks, lk.GraphLock{Lock: n.name, Waiting: waiting})
			var holders []struct {
				Client    string  `db:"client"`
				Mode      lk.Mode `db:"mode"`
				Token     int64   `db:"token"`
				ExpiresAt int64   `db:"expires_at"`
			}
			if err := tx.selectAll(&holders, qGraphHolders, n.name, limit); err != nil {
				return g, err
			}
			if int64(len(holders)) == limit {
				g.Cut = true
			}
			for _, h := range holders {
				if h.ExpiresAt <= now {
					if waiting > 0 {
						return g, ErrGraphUnsettled
					}
					continue
				}
				hold(lk.Holder{Lock: n.name, Client: h.Client, Mode: h.Mode, Token: h.Token, ExpiresAt: h.ExpiresAt})
			}
			if waiting == 0 {
				continue
			}
			var queue []struct {
				Client   string  `db:"client"`
				Mode     lk.Mode `db:"mode"`
				QueuedAt int64   `db:"queued_at"`
			}
			if err := tx.selectAll(&queue, qGraphQueue, n.name, limit); err != nil {
				return g, err
			}
			if int64(len(queue)) == limit {
				g.Cut = true
			}
			for _, q := range queue {
				wait(lk.GraphWait{Client: q.Client, Lock: n.name, Mode: q.Mode, QueuedAt: q.QueuedAt})
			}
			continue
		}
		var age int64
		if _, err := tx.row(qGraphClient, []any{n.name}, &age); err != nil {
			return g, err
		}
		g.Clients = append(g.Clients, lk.GraphClient{Client: n.name, Age: age})
		var holds []LeaseRow
		if err := tx.selectAll(&holds, qGraphHolds, n.name, now, limit); err != nil {
			return g, err
		}
		if int64(len(holds)) == limit {
			g.Cut = true
		}
		for _, h := range holds {
			hold(lk.Holder{Lock: h.Lock, Client: n.name, Mode: h.Mode, Token: h.Token, ExpiresAt: h.ExpiresAt})
		}
		var w lk.GraphWait
		found, err := tx.row(qGraphWait, []any{n.name}, &w.Lock, &w.Mode, &w.QueuedAt)
		if err != nil {
			return g, err
		}
		if found {
			w.Client = n.name
			wait(w)
		}
	}
	return g, nil
}
