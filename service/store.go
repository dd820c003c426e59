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
func (s *Service) Write(ctx context.Context, ts int64, lock, key, value string, token int64) error {
	return s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(lock, key, value); err != nil {
			return err
		}
		if token < 1 {
			return fmt.Errorf("%w: token must be >= 1", lk.ErrInvalidArguments)
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
			return lk.ErrStaleToken
		}
		return repo.StoreValuePut(tx, lock, key, value, token, ts)
	})
}

// Read returns the last value accepted for (lock, key); found is false when
// none was.
func (s *Service) Read(ctx context.Context, ts int64, lock, key string) (value string, found bool, err error) {
	err = s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := checkNames(lock, key); err != nil {
			return err
		}
		value, found, err = repo.StoreValueGet(tx, lock, key)
		return err
	})
	return value, found, err
}
