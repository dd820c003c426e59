package repo

import "database/sql"

// StoreWriteState is what a write needs to know about the fenced store
// before it decides, under a quota: the lock's fence and what its store
// holds, and the key's current entry. It is read in one lookup of each row,
// whatever else the lock's store holds.
type StoreWriteState struct {
	Fenced     bool  // the store accepted a write for the lock before
	Highest    int64 // the highest token it accepted for the lock
	Keys       int64 // the lock's keys
	Bytes      int64 // the lock's bytes of keys and values
	KeyExists  bool  // the key has a value
	EntryBytes int64 // the key's and its value's bytes, when it has one
}

var qStoreWriteState = portable("StoreWriteState", `SELECT f.highest_token, f.key_count, f.byte_count,
		       octet_length(v.key) + octet_length(v.value)
		  FROM (SELECT 1) AS one LEFT JOIN store_fences f ON f.lock = ?1
		  LEFT JOIN store_values v ON v.lock = ?1 AND v.key = ?2`)

// StoreWriteStateGet reads the StoreWriteState of (lock, key).
func StoreWriteStateGet(tx *Tx, lock, key string) (StoreWriteState, error) {
	var highest, keys, bytes, entry sql.NullInt64
	_, err := tx.row(qStoreWriteState, []any{lock, key}, &highest, &keys, &bytes, &entry)
	return StoreWriteState{Fenced: highest.Valid, Highest: highest.Int64, Keys: keys.Int64, Bytes: bytes.Int64,
		KeyExists: entry.Valid, EntryBytes: entry.Int64}, err
}

var qStoreFenceRaise = portable("StoreFenceRaise", `INSERT INTO store_fences (lock, highest_token, key_count, byte_count)
		VALUES (?1, ?2, 1, ?4)
		ON CONFLICT (lock) DO UPDATE SET highest_token = excluded.highest_token,
		key_count = store_fences.key_count
		    + CASE WHEN EXISTS (SELECT 1 FROM store_values v WHERE v.lock = ?1 AND v.key = ?3) THEN 0 ELSE 1 END,
		byte_count = store_fences.byte_count + ?4
		    - coalesce((SELECT octet_length(v.key) + octet_length(v.value) FROM store_values v WHERE v.lock = ?1 AND v.key = ?3), 0)
		WHERE excluded.highest_token >= store_fences.highest_token`)

// StoreFenceRaise records token as the highest accepted for lock if it is not
// lower than the current highest (L6), and counts the write of key, an entry
// of `bytes` bytes of key and value, into what the lock's store holds: all in
// one conditional write, which reads the key's current entry itself.
// accepted is false (and nothing changes) when the token is stale. A lock
// without a fence has no values, so its first write is its only key.
func StoreFenceRaise(tx *Tx, lock, key string, token, bytes int64) (accepted bool, err error) {
	n, err := tx.affected(qStoreFenceRaise, lock, token, key, bytes)
	return n == 1, err
}

var qStoreValuePut = portable("StoreValuePut", `INSERT INTO store_values (lock, key, value, token, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (lock, key) DO UPDATE SET value = excluded.value, token = excluded.token,
		written_at = excluded.written_at`)

// StoreValuePut stores value as the last accepted one for (lock, key), after
// StoreFenceRaise accepted it.
func StoreValuePut(tx *Tx, lock, key, value string, token, now int64) error {
	err := tx.write(qStoreValuePut, lock, key, value, token, now)
	return err
}

var qStoreValueGet = portable("StoreValueGet", `SELECT value, token FROM store_values WHERE lock = ? AND key = ?`)

// StoreValueGet returns the last accepted value for (lock, key) and the
// token of the write that stored it.
func StoreValueGet(tx *Tx, lock, key string) (value string, token int64, found bool, err error) {
	found, err = tx.row(qStoreValueGet, []any{lock, key}, &value, &token)
	return value, token, found, err
}
