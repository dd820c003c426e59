package repo

// StoreFenceRaise records token as the highest accepted for lock if it is not
// lower than the current highest (L6), in one conditional write; accepted is
// false (and nothing changes) when the token is stale.
func StoreFenceRaise(tx *Tx, lock string, token int64) (accepted bool, err error) {
	n, err := tx.affected(`INSERT INTO store_fences (lock, highest_token) VALUES (?, ?)
		ON CONFLICT (lock) DO UPDATE SET highest_token = excluded.highest_token
		WHERE excluded.highest_token >= store_fences.highest_token`, lock, token)
	return n == 1, err
}

// StoreFenceGet returns the highest token the store accepted for lock (0 if none).
func StoreFenceGet(tx *Tx, lock string) (int64, error) {
	v, _, err := tx.rowInt(`SELECT highest_token FROM store_fences WHERE lock = ?`, lock)
	return v, err
}

// StoreValuePut stores value as the last accepted one for (lock, key).
func StoreValuePut(tx *Tx, lock, key, value string, token, now int64) error {
	_, err := tx.exec(`INSERT INTO store_values (lock, key, value, token, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (lock, key) DO UPDATE SET value = excluded.value, token = excluded.token,
		written_at = excluded.written_at`, lock, key, value, token, now)
	return err
}

// StoreValueGet returns the last accepted value for (lock, key).
func StoreValueGet(tx *Tx, lock, key string) (value string, found bool, err error) {
	found, err = tx.row(`SELECT value FROM store_values WHERE lock = ? AND key = ?`, []any{lock, key}, &value)
	return value, found, err
}
