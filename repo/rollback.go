package repo

var qLocksRaiseTokens = portable("LocksRaiseTokens", `UPDATE locks SET last_token = ?1 WHERE last_token < ?1`)

// LocksRaiseTokens raises every lock's fencing counter to at least floor:
// after a database went back in time, its next grants carry tokens above
// every one issued before (serve --accept-rollback). It reads every lock
// row, once.
func LocksRaiseTokens(tx *Tx, floor int64) error {
	return tx.write(qLocksRaiseTokens, floor)
}
