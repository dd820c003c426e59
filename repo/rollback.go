package repo

var (
	qRaiseTokensLocks = portable("RaiseTokens.locks", `UPDATE locks SET last_token = ?1 WHERE last_token < ?1`)
	qRaiseTokensFloor = portable("RaiseTokens.floor", `UPDATE service SET token_floor = ?1 WHERE id = 1 AND token_floor < ?1`)
)

// RaiseTokens raises every lock's fencing counter to at least floor, and
// the service's token floor, where the counter of a lock created later
// starts (Counters.TokenFloor): after a database went back in time, its
// next grants carry tokens above every one issued before (serve
// --accept-rollback), on the locks it lost with its last transactions
// too. It reads every lock row, once. Nothing else writes the floor.
func RaiseTokens(tx *Tx, floor int64) error {
	tx.d.ends.reset()
	if err := tx.write(qRaiseTokensLocks, floor); err != nil {
		return err
	}
	return tx.write(qRaiseTokensFloor, floor)
}
