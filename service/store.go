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
	return WriteAs(op, req, Writer{MayActAs: mayActAs})
}

// Writer is who writes to the fenced store, for the rules that depend on
// it: the client ids it may act as (nil: any), and the principal of the
// auth file it is ("" without one) with its bound on the bytes its writes
// may hold in all (0: none).
type Writer struct {
	MayActAs  func(client string) bool
	Principal string
	MaxBytes  int64
}

// WriteAs is Write by w: the value is counted as w.Principal's, and a write
// that would take w's values beyond w.MaxBytes, or the whole store beyond
// StoreQuota.MaxTotal, is refused as lk.ErrQuotaExceeded.
func WriteAs(op *Op, req lk.WriteRequest, w Writer) (lk.WriteResult, error) {
	var res lk.WriteResult
	if err := req.Validate(); err != nil {
		return res, err
	}
	tx, lock, token := op.Tx, req.Lock, req.Token
	if op.Config.StrictFencing {
		// Checked first: a token never granted is refused as such,
		// whatever the fence, so that it can neither raise the fence
		// nor pass for merely stale.
		if refused, err := granted(tx, lock, token, w.MayActAs); refused != nil || err != nil {
			return res, cmp.Or(err, refused)
		}
	}
	size := int64(len(req.Key) + len(req.Value))
	if op.Config.Quota.bounded() || w.MaxBytes > 0 {
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
			if refused, err := usageCheck(tx, op.Config.Quota.MaxTotal, w, st, size); refused != nil || err != nil {
				return res, cmp.Or(err, refused)
			}
		}
	}
	accepted, err := repo.StoreFenceRaise(tx, lock, req.Key, token, size)
	if err != nil {
		return res, err
	}
	if !accepted && !failpoint.Enabled(failpoint.AcceptStaleWrite) {
		return res, staleStore(op, lock, token)
	}
	if err := repo.StoreValuePut(tx, lock, req.Key, req.Value, w.Principal, token, op.Now); err != nil {
		return res, err
	}
	return lk.WriteResult{Outcome: lk.OK}, nil
}

// staleStore reports a write or delete refused by the fence (L6).
func staleStore(op *Op, lock string, token int64) error {
	st, err := repo.StoreWriteStateGet(op.Tx, lock, "")
	if err != nil {
		return err
	}
	op.emit(Event{Kind: lk.EventStaleWrite, Lock: lock, At: op.Now, Token: token, Highest: st.Highest})
	return lk.Errorf(lk.CodeStaleToken, fmt.Sprintf("token %d is lower than %d, the highest accepted for %s", token, st.Highest, lock))
}

// usageCheck refuses a write of an entry of size bytes, over the entry st
// found, that takes w's values beyond w.MaxBytes or the whole store beyond
// maxTotal. As the quota per lock, only growth is refused: a write that
// makes a writer's count, or the total, no larger passes over a bound.
func usageCheck(tx *repo.Tx, maxTotal int64, w Writer, st repo.StoreWriteState, size int64) (refused, err error) {
	if maxTotal <= 0 && w.MaxBytes <= 0 {
		return nil, nil
	}
	mine, total, err := repo.StoreUsageGet(tx, w.Principal)
	if err != nil {
		return nil, err
	}
	growth := size - st.EntryBytes // of the total
	mineGrowth := size
	if st.KeyExists && st.Owner == w.Principal {
		mineGrowth = growth
	}
	if w.MaxBytes > 0 && mineGrowth > 0 && mine+mineGrowth > w.MaxBytes {
		return lk.Errorf(lk.CodeQuotaExceeded, fmt.Sprintf(
			"principal %s's writes hold %d bytes of keys and values, and its bound (max_store_bytes) is %d: this write would take them to %d",
			w.Principal, mine, w.MaxBytes, mine+mineGrowth)), nil
	}
	if maxTotal > 0 && growth > 0 && total+growth > maxTotal {
		return lk.Errorf(lk.CodeQuotaExceeded, fmt.Sprintf(
			"the fenced store holds %d bytes of keys and values, and the server's bound (--store-max-total) is %d: this write would take it to %d",
			total, maxTotal, total+growth)), nil
	}
	return nil, nil
}

// Delete removes (lock, key) from the fenced store, fenced as Write is (L6):
// a token lower than the highest accepted for lock is lk.ErrStaleToken, and
// under Config.StrictFencing a token never granted for lock, or granted to
// another client than req.Client, is lk.ErrTokenNotGranted; either way
// nothing changes. An accepted token raises the fence as a write's would,
// whether the key had a value or not. A delete is never over a quota.
func Delete(op *Op, req lk.DeleteRequest) (lk.DeleteResult, error) {
	var res lk.DeleteResult
	if err := req.Validate(); err != nil {
		return res, err
	}
	tx, lock, token := op.Tx, req.Lock, req.Token
	if op.Config.StrictFencing {
		own := func(client string) bool { return client == req.Client }
		if refused, err := granted(tx, lock, token, own); refused != nil || err != nil {
			return res, cmp.Or(err, refused)
		}
	}
	accepted, deleted, err := repo.StoreValueDelete(tx, lock, req.Key, token)
	if err != nil {
		return res, err
	}
	if !accepted {
		return res, staleStore(op, lock, token)
	}
	return lk.DeleteResult{Outcome: lk.OK, Deleted: deleted}, nil
}

// StoreClear removes every value of a lock's fenced store, whoever wrote
// it, and keeps the fence: an administrator's clean-up, which the server
// allows admins alone.
func StoreClear(op *Op, req lk.StoreClearRequest) (lk.StoreClearResult, error) {
	if err := req.Validate(); err != nil {
		return lk.StoreClearResult{}, err
	}
	keys, bytes, err := repo.StoreClear(op.Tx, req.Lock)
	if err != nil {
		return lk.StoreClearResult{}, err
	}
	return lk.StoreClearResult{Outcome: lk.OK, Keys: keys, Bytes: bytes}, nil
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
// below unless told otherwise (serve --store-max-keys, --store-max-bytes,
// --store-max-total).
type StoreQuota struct {
	MaxKeys  int64
	MaxBytes int64
	// MaxTotal bounds the bytes of keys and values of every lock's store
	// together (serve --store-max-total): a bound for the database that
	// the bounds per lock do not give, over many locks.
	MaxTotal int64
}

// The server's default quota: generous for the store's purpose (a job's
// progress records and results' names, fenced by its lease), small enough
// that a runaway writer fills at most a few MiB per lock.
const (
	DefaultStoreMaxKeys  = 1000
	DefaultStoreMaxBytes = 4 << 20
	// DefaultStoreMaxTotal is 1 GiB: 256 locks filled to their bound.
	DefaultStoreMaxTotal = 1 << 30
)

// bounded reports whether q bounds anything.
func (q StoreQuota) bounded() bool { return q.MaxKeys > 0 || q.MaxBytes > 0 || q.MaxTotal > 0 }

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
