package service

import (
	"context"
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Write stores value under (lock, key) if token is not lower than the highest
// token the fenced store accepted for lock (L6), and returns lk.ErrStaleToken,
// changing nothing, otherwise. The store never looks at leases.
func (s *Service) Write(ctx context.Context, ts int64, req lk.WriteRequest) (lk.WriteResult, error) {
	lock, token := req.Lock, req.Token
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		accepted, err := repo.StoreFenceRaise(tx, lock, token)
		if err != nil {
			return err
		}
		if !accepted {
			highest, err := repo.StoreFenceGet(tx, lock)
			if err != nil {
				return err
			}
			s.events = append(s.events, Event{Kind: EventStaleWrite, Lock: lock, At: ts, Token: token, Highest: highest})
			return lk.Errorf(lk.CodeStaleToken, fmt.Sprintf("token %d is lower than %d, the highest accepted for %s", token, highest, lock))
		}
		return repo.StoreValuePut(tx, lock, req.Key, req.Value, token, ts)
	})
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
