package repo

var qStoreFenceRaise = shared("StoreFenceRaise", `INSERT INTO store_fences (lock, highest_token) VALUES (?, ?)
		ON CONFLICT (lock) DO UPDATE SET highest_token = excluded.highest_token
		WHERE excluded.highest_token >= store_fences.highest_token`)

// StoreFenceRaise records token as the highest accepted for lock if it is not
// lower than the current highest (L6), in one conditional write; accepted is
// false (and nothing changes) when the token is stale.
func StoreFenceRaise(tx *Tx, lock string, token int64) (accepted bool, err error) {
	n, err := tx.affected(qStoreFenceRaise, lock, token)
	return n == 1, err
}

var qStoreFenceGet = shared("StoreFenceGet", `SELECT highest_token FROM store_fences WHERE lock = ?`)

// StoreFenceGet returns the highest token the store accepted for lock (0 if none).
func StoreFenceGet(tx *Tx, lock string) (int64, error) {
	v, _, err := tx.rowInt(qStoreFenceGet, lock)
	return v, err
}

var qStoreValuePut = shared("StoreValuePut", `INSERT INTO store_values (lock, key, value, token, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (lock, key) DO UPDATE SET value = excluded.value, token = excluded.token,
		written_at = excluded.written_at`)

// StoreValuePut stores value as the last accepted one for (lock, key).
func StoreValuePut(tx *Tx, lock, key, value string, token, now int64) error {
	_, err := tx.exec(qStoreValuePut, lock, key, value, token, now)
	return err
}

var qStoreValueGet = shared("StoreValueGet", `SELECT value, token FROM store_values WHERE lock = ? AND key = ?`)

// StoreValueGet returns the last accepted value for (lock, key) and the
// token of the write that stored it.
func StoreValueGet(tx *Tx, lock, key string) (value string, token int64, found bool, err error) {
	found, err = tx.row(qStoreValueGet, []any{lock, key}, &value, &token)
	return value, token, found, err
}
