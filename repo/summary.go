package repo

var qDatabaseSummary = portable("DatabaseSummary", `SELECT count(*), coalesce(max(last_token), 0) FROM locks`)

// Summary is what a server logs of its database at start.
type Summary struct {
	Locks        int64 // rows in locks: every lock ever taken (a lock's row keeps its fencing counter)
	HighestToken int64 // the highest fencing token issued, over all locks
}

// DatabaseSummary counts the locks and finds the highest token issued. It
// reads every lock row, once, at start: cheap next to the lapse sweep that
// follows.
func DatabaseSummary(tx *Tx) (Summary, error) {
	var s Summary
	_, err := tx.row(qDatabaseSummary, nil, &s.Locks, &s.HighestToken)
	return s, err
}
