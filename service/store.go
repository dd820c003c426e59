package service

import (
	"cmp"
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Write stores value under (lock, key) if token is not lower than the highest
// token the fenced store accepted for lock (L6), and returns lk.ErrStaleToken,
// changing nothing, otherwise. The store never looks at leases. Beyond the
// configured StoreQuota (none in the contract), it returns lk.ErrQuotaExceeded
// and changes nothing either; a stale token is reported first. Under
// Config.StrictFencing, a token never granted for lock is refused before
// either, as lk.ErrTokenNotGranted (fencing.go); mayActAs, when not nil, is
// the client ids the caller may act as (a client principal of an auth file),
// and the token must then have been granted to one of them.
func Write(op *Op, req lk.WriteRequest, mayActAs func(client string) bool) (lk.WriteResult, error) {
	var res lk.WriteResult
	if err := req.Validate(); err != nil {
		return res, err
	}
	tx, lock, token := op.Tx, req.Lock, req.Token
	if op.Config.StrictFencing {
		// Checked first: a token never granted is refused as such,
		// whatever the fence, so that it can neither raise the fence
		// nor pass for merely stale.
		if refused, err := granted(tx, req, mayActAs); refused != nil || err != nil {
			return res, cmp.Or(err, refused)
		}
	}
	size := int64(len(req.Key) + len(req.Value))
	if op.Config.Quota.bounded() {
		// Judged on what the store holds before the write: one read
		// more, which a replay, without a quota, never pays.
		st, err := repo.StoreWriteStateGet(tx, lock, req.Key)
		if err != nil {
			return res, err
		}
		if !(st.Fenced && token < st.Highest) {
			if refused := op.Config.Quota.check(lock, st, size); refused != nil {
				return res, refused
			}
		}
	}
	accepted, err := repo.StoreFenceRaise(tx, lock, req.Key, token, size)
	if err != nil {
		return res, err
	}
	if !accepted && !failpoint.Enabled(failpoint.AcceptStaleWrite) {
		st, err := repo.StoreWriteStateGet(tx, lock, req.Key)
		if err != nil {
			return res, err
		}
		op.emit(Event{Kind: lk.EventStaleWrite, Lock: lock, At: op.Now, Token: token, Highest: st.Highest})
		return res, lk.Errorf(lk.CodeStaleToken, fmt.Sprintf("token %d is lower than %d, the highest accepted for %s", token, st.Highest, lock))
	}
	if err := repo.StoreValuePut(tx, lock, req.Key, req.Value, token, op.Now); err != nil {
		return res, err
	}
	return lk.WriteResult{Outcome: lk.OK}, nil
}

// Read returns the last value accepted for (lock, key), or a nil Value
// when none was.
func Read(op *Op, req lk.ReadRequest) (lk.ReadResult, error) {
	if err := req.Validate(); err != nil {
		return lk.ReadResult{}, err
	}
	value, token, found, err := repo.StoreValueGet(op.Tx, req.Lock, req.Key)
	if !found || err != nil {
		return lk.ReadResult{}, err
	}
	return lk.ReadResult{Value: &value, Token: token}, nil
}

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
