package service

import (
	"context"
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Write stores value under (lock, key) if token is not lower than the highest
// token the fenced store accepted for lock (L6), and returns lk.ErrStaleToken,
// changing nothing, otherwise. The store never looks at leases. Beyond the
// service's StoreQuota (none in the contract), it returns lk.ErrQuotaExceeded
// and changes nothing either; a stale token is reported first. Under
// Options.StrictFencing, a token never granted for lock is refused before
// either, as lk.ErrTokenNotGranted (fencing.go).
func (s *Service) Write(ctx context.Context, ts int64, req lk.WriteRequest) (lk.WriteResult, error) {
	return s.WriteAs(ctx, ts, req, nil)
}

// WriteAs is Write by a caller that may act only as the client ids mayActAs
// accepts (a client principal of an auth file); nil for any. Under
// Options.StrictFencing, the token must then have been granted to one of
// them, by its row of grants, or the write is refused as
// lk.ErrTokenNotGranted (fencing.go).
func (s *Service) WriteAs(ctx context.Context, ts int64, req lk.WriteRequest, mayActAs func(client string) bool) (lk.WriteResult, error) {
	lock, token := req.Lock, req.Token
	var refused error // not the transaction's error: the time advance and the lapses stand
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		if s.strict {
			// Checked first: a token never granted is refused as such,
			// whatever the fence, so that it can neither raise the fence
			// nor pass for merely stale.
			var err error
			if refused, err = s.granted(tx, req, mayActAs); refused != nil || err != nil {
				return err
			}
		}
		size := int64(len(req.Key) + len(req.Value))
		if s.quota.bounded() {
			// Judged on what the store holds before the write: one read
			// more, which a replay, without a quota, never pays.
			st, err := repo.StoreWriteStateGet(tx, lock, req.Key)
			if err != nil {
				return err
			}
			if !(st.Fenced && token < st.Highest) {
				if refused = s.quota.check(lock, st, size); refused != nil {
					return nil
				}
			}
		}
		accepted, err := repo.StoreFenceRaise(tx, lock, req.Key, token, size)
		if err != nil {
			return err
		}
		if !accepted && !failpoint.Enabled(failpoint.AcceptStaleWrite) {
			st, err := repo.StoreWriteStateGet(tx, lock, req.Key)
			if err != nil {
				return err
			}
			s.events = append(s.events, Event{Kind: EventStaleWrite, Lock: lock, At: ts, Token: token, Highest: st.Highest})
			return lk.Errorf(lk.CodeStaleToken, fmt.Sprintf("token %d is lower than %d, the highest accepted for %s", token, st.Highest, lock))
		}
		return repo.StoreValuePut(tx, lock, req.Key, req.Value, token, ts)
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		return lk.WriteResult{}, err
	}
	return lk.WriteResult{Outcome: lk.OK}, nil
}

// Read returns the last value accepted for (lock, key); found is false when
// none was.
func (s *Service) Read(ctx context.Context, ts int64, req lk.ReadRequest) (lk.ReadResult, error) {
	var out lk.ReadResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		value, token, found, err := repo.StoreValueGet(tx, req.Lock, req.Key)
		if found {
			out = lk.ReadResult{Value: &value, Token: token}
		}
		return err
	})
	return out, err
}
