package repo

import "database/sql"

// StoreWriteState is what a write needs to know about the fenced store
// before it decides, under a quota: the lock's fence and what its store
// holds, and the key's current entry. It is read in one lookup of each row,
// whatever else the lock's store holds.
type StoreWriteState struct {
	Fenced     bool   // the store accepted a write for the lock before
	Highest    int64  // the highest token it accepted for the lock
	Keys       int64  // the lock's keys
	Bytes      int64  // the lock's bytes of keys and values
	KeyExists  bool   // the key has a value
	EntryBytes int64  // the key's and its value's bytes, when it has one
	Owner      string // who wrote the key's value, when it has one
}

var qStoreWriteState = portable("StoreWriteState", `SELECT f.highest_token, f.key_count, f.byte_count,
		       octet_length(v.key) + octet_length(v.value), v.owner
		  FROM (SELECT 1) AS one LEFT JOIN store_fences f ON f.lock = ?1
		  LEFT JOIN store_values v ON v.lock = ?1 AND v.key = ?2`)

// StoreWriteStateGet reads the StoreWriteState of (lock, key).
func StoreWriteStateGet(tx *Tx, lock, key string) (StoreWriteState, error) {
	var highest, keys, bytes, entry sql.NullInt64
	var owner sql.NullString
	_, err := tx.row(qStoreWriteState, []any{lock, key}, &highest, &keys, &bytes, &entry, &owner)
	return StoreWriteState{Fenced: highest.Valid, Highest: highest.Int64, Keys: keys.Int64, Bytes: bytes.Int64,
		KeyExists: entry.Valid, EntryBytes: entry.Int64, Owner: owner.String}, err
}

var qStoreUsage = portable("StoreUsage", `SELECT coalesce((SELECT byte_count FROM store_owners WHERE owner = ?1), 0),
		       (SELECT coalesce(sum(byte_count), 0) FROM store_owners)`)

// StoreUsageGet reads the bytes of keys and values that owner's writes
// hold, and that the whole store holds: one row per writer, so a read of
// as many rows as the auth file has principals.
func StoreUsageGet(tx *Tx, owner string) (ownerBytes, total int64, err error) {
	_, err = tx.row(qStoreUsage, []any{owner}, &ownerBytes, &total)
	return ownerBytes, total, err
}

var qStoreOwnerDrop = portable("StoreOwnerDrop", `UPDATE store_owners
		SET byte_count = byte_count - (SELECT octet_length(v.key) + octet_length(v.value) FROM store_values v WHERE v.lock = ?1 AND v.key = ?2)
		WHERE owner = (SELECT v.owner FROM store_values v WHERE v.lock = ?1 AND v.key = ?2)`)

var qStoreOwnerAdd = portable("StoreOwnerAdd", `INSERT INTO store_owners (owner, byte_count) VALUES (?, ?)
		ON CONFLICT (owner) DO UPDATE SET byte_count = store_owners.byte_count + excluded.byte_count`)

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

var qStoreValuePut = portable("StoreValuePut", `INSERT INTO store_values (lock, key, value, token, written_at, owner) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (lock, key) DO UPDATE SET value = excluded.value, token = excluded.token,
		written_at = excluded.written_at, owner = excluded.owner`)

// StoreValuePut stores value as the last accepted one for (lock, key),
// written by owner, after StoreFenceRaise accepted it, and moves the entry's
// bytes from its previous owner's count to owner's.
func StoreValuePut(tx *Tx, lock, key, value, owner string, token, now int64) error {
	if err := tx.write(qStoreOwnerDrop, lock, key); err != nil {
		return err
	}
	if err := tx.write(qStoreOwnerAdd, owner, int64(len(key)+len(value))); err != nil {
		return err
	}
	return tx.write(qStoreValuePut, lock, key, value, token, now, owner)
}

var qStoreFenceDelete = portable("StoreFenceDelete", `INSERT INTO store_fences (lock, highest_token, key_count, byte_count)
		VALUES (?1, ?2, 0, 0)
		ON CONFLICT (lock) DO UPDATE SET highest_token = excluded.highest_token,
		key_count = store_fences.key_count
		    - CASE WHEN EXISTS (SELECT 1 FROM store_values v WHERE v.lock = ?1 AND v.key = ?3) THEN 1 ELSE 0 END,
		byte_count = store_fences.byte_count
		    - coalesce((SELECT octet_length(v.key) + octet_length(v.value) FROM store_values v WHERE v.lock = ?1 AND v.key = ?3), 0)
		WHERE excluded.highest_token >= store_fences.highest_token`)

var qStoreValueDelete = portable("StoreValueDelete", `DELETE FROM store_values WHERE lock = ? AND key = ?`)

// StoreValueDelete removes (lock, key) from the fenced store if token is not
// lower than the highest accepted for lock (L6, as a write), raising the
// fence to token, and takes the entry out of its lock's and its owner's
// counts. accepted is false (and nothing changes) when the token is stale;
// deleted tells whether the key had a value.
func StoreValueDelete(tx *Tx, lock, key string, token int64) (accepted, deleted bool, err error) {
	n, err := tx.affected(qStoreFenceDelete, lock, token, key)
	if err != nil || n != 1 {
		return false, false, err
	}
	if err := tx.write(qStoreOwnerDrop, lock, key); err != nil {
		return true, false, err
	}
	n, err = tx.affected(qStoreValueDelete, lock, key)
	return true, n == 1, err
}

var qStoreClearOwners = portable("StoreClearOwners", `UPDATE store_owners
		SET byte_count = byte_count - (SELECT coalesce(sum(octet_length(v.key) + octet_length(v.value)), 0)
		                                 FROM store_values v WHERE v.lock = ?1 AND v.owner = store_owners.owner)
		WHERE owner IN (SELECT v.owner FROM store_values v WHERE v.lock = ?1)`)

var qStoreClearFence = portable("StoreClearFence", `UPDATE store_fences SET key_count = 0, byte_count = 0 WHERE lock = ?`)

var qStoreClearValues = portable("StoreClearValues", `DELETE FROM store_values WHERE lock = ?`)

// StoreClear removes every value of lock's fenced store, and keeps its
// fence, so that a holder's stale token stays refused: a cost of the
// lock's keys, which its quota bounds. keys and bytes are what it removed.
func StoreClear(tx *Tx, lock string) (keys, bytes int64, err error) {
	st, err := StoreWriteStateGet(tx, lock, "")
	if err != nil || st.Keys == 0 && st.Bytes == 0 {
		return 0, 0, err
	}
	if err := tx.write(qStoreClearOwners, lock); err != nil {
		return 0, 0, err
	}
	if err := tx.write(qStoreClearFence, lock); err != nil {
		return 0, 0, err
	}
	if err := tx.write(qStoreClearValues, lock); err != nil {
		return 0, 0, err
	}
	return st.Keys, st.Bytes, nil
}

var qStoreValueGet = portable("StoreValueGet", `SELECT value, token FROM store_values WHERE lock = ? AND key = ?`)

// StoreValueGet returns the last accepted value for (lock, key) and the
// token of the write that stored it.
func StoreValueGet(tx *Tx, lock, key string) (value string, token int64, found bool, err error) {
	found, err = tx.row(qStoreValueGet, []any{lock, key}, &value, &token)
	return value, token, found, err
}
