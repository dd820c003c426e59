package service

import (
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// StoreQuota bounds what the fenced store keeps per lock, so that one
// careless or hostile writer cannot fill the database: a lock's keys, and
// its bytes of keys and values (UTF-8). Zero is no bound. The contract has
// no quota, and `leasekeeper run` sets none; the server sets the defaults
// below unless told otherwise (serve --store-max-keys, --store-max-bytes).
type StoreQuota struct {
	MaxKeys  int64
	MaxBytes int64
}

// The server's default quota: generous for the store's purpose (a job's
// progress records and results' names, fenced by its lease), small enough
// that a runaway writer fills at most a few MiB per lock.
const (
	DefaultStoreMaxKeys  = 1000
	DefaultStoreMaxBytes = 4 << 20
)

// bounded reports whether q bounds anything.
func (q StoreQuota) bounded() bool { return q.MaxKeys > 0 || q.MaxBytes > 0 }

// check refuses a write of an entry of size bytes (key and value) that takes
// the lock's store, as st found it, beyond q. Only growth is refused: a
// write that adds no key, or no bytes, is accepted even over a bound, so that
// lowering the quota never freezes what a lock already holds.
func (q StoreQuota) check(lock string, st repo.StoreWriteState, size int64) error {
	keys, bytes := st.Keys, st.Bytes-st.EntryBytes+size
	if !st.KeyExists {
		keys++
	}
	if q.MaxKeys > 0 && keys > q.MaxKeys && keys > st.Keys {
		return lk.Errorf(lk.CodeQuotaExceeded, fmt.Sprintf(
			"the store of %s holds %d keys and its quota is %d: a new key is refused (overwriting one is not)", lock, st.Keys, q.MaxKeys))
	}
	if q.MaxBytes > 0 && bytes > q.MaxBytes && bytes > st.Bytes {
		return lk.Errorf(lk.CodeQuotaExceeded, fmt.Sprintf(
			"the store of %s would hold %d bytes of keys and values, over its quota of %d", lock, bytes, q.MaxBytes))
	}
	return nil
}
