package repo

var qStoreFenceGet = portable("StoreFenceGet", `SELECT highest_token FROM store_fences WHERE lock = ?`)

// StoreFenceGet returns the highest token the fenced store accepted for
// lock; fenced is false when it accepted none.
func StoreFenceGet(tx *Tx, lock string) (highest int64, fenced bool, err error) {
	return tx.rowInt(qStoreFenceGet, lock)
}

var qStoreFenceLower = portable("StoreFenceLower", `UPDATE store_fences SET highest_token = ?2
		WHERE lock = ?1 AND highest_token > ?2`)

// StoreFenceLower sets lock's fence back to token when it is above it (an
// administrator's unfence); it never raises one. lowered is false when the
// fence was not above token, or the lock has none.
func StoreFenceLower(tx *Tx, lock string, token int64) (lowered bool, err error) {
	n, err := tx.affected(qStoreFenceLower, lock, token)
	return n == 1, err
}

var qGrantClientByToken = portable("GrantClientByToken", historyUnion(`client`, `lock = ?1 AND token = ?2`, ``, `1`))

// GrantClientByToken returns the client id that lock's token was granted
// to, from its grant's row in the history (grants.go); found is false when the row is gone (pruned:
// the lease ended long ago) or never was (a token issued before the table).
func GrantClientByToken(tx *Tx, lock string, token int64) (client string, found bool, err error) {
	found, err = tx.row(qGrantClientByToken, []any{lock, token}, &client)
	return client, found, err
}
