package service

import (
	"context"
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// The operator console's reads (GET /v1/store, GET /v1/graph): apart from
// the committer where the database allows (read.go), in a transaction
// otherwise.

// Store returns a page of req.Lock's fenced store at ts.
func (s *Service) Store(ctx context.Context, ts int64, req lk.StoreRequest) (lk.StoreResult, error) {
	var out lk.StoreResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		var err error
		out, err = storePage(tx, req)
		return err
	})
	return out, err
}

// ReadStore is Store read apart. The store does not change with time, so
// the last commit is its state at ts.
func (s *Service) ReadStore(ctx context.Context, ts int64, req lk.StoreRequest) (lk.StoreResult, error) {
	var out lk.StoreResult
	if err := req.Validate(); err != nil {
		return out, err
	}
	if !s.db.CanReadApart() {
		return out, ErrNeedsTx
	}
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		var err error
		out, err = storePage(tx, req)
		return err
	})
	return out, err
}

func storePage(tx *repo.Tx, req lk.StoreRequest) (lk.StoreResult, error) {
	out := lk.StoreResult{Lock: req.Lock}
	var more bool
	var err error
	out.Highest, out.KeyCount, out.Keys, more, err = repo.StorePage(tx, req.Lock, req.After, req.Limit)
	if err == nil && more {
		out.Next = &out.Keys[len(out.Keys)-1].Key
	}
	return out, err
}

// Graph returns the wait-for graph around req.Lock or req.Client at ts,
// after the leases that lapsed by ts were retired.
func (s *Service) Graph(ctx context.Context, ts int64, req lk.GraphRequest) (lk.GraphResult, error) {
	var out lk.GraphResult
	err := s.withTx(ctx, ts, func(tx *repo.Tx) error {
		if err := req.Validate(); err != nil {
			return err
		}
		var err error
		out, err = repo.Graph(tx, req.Lock, req.Client, lk.MaxGraphNodes, ts)
		return err
	})
	return out, err
}

// ReadGraph is Graph read apart. A lock of the graph with waiters and a
// lease that ended by ts but is not retired yet is the exception, as for
// ReadLocks: its retirement hands the lock over, and ReadGraph answers
// ErrNeedsTx.
func (s *Service) ReadGraph(ctx context.Context, ts int64, req lk.GraphRequest) (lk.GraphResult, error) {
	var out lk.GraphResult
	if err := req.Validate(); err != nil {
		return out, err
	}
	if !s.db.CanReadApart() {
		return out, ErrNeedsTx
	}
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		var err error
		out, err = repo.Graph(tx, req.Lock, req.Client, lk.MaxGraphNodes, ts)
		if errors.Is(err, repo.ErrGraphUnsettled) {
			return ErrNeedsTx
		}
		return err
	})
	return out, err
}
