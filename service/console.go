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
	return readInTx(s, ctx, ts, req.Validate, func(tx *repo.Tx) (lk.StoreResult, error) { return storePage(tx, req) })
}

// ReadStore is Store read apart. The store does not change with time, so
// the last commit is its state at ts.
func (s *Service) ReadStore(ctx context.Context, ts int64, req lk.StoreRequest) (lk.StoreResult, error) {
	return readApart(s, ctx, req.Validate, func(tx *repo.Tx) (lk.StoreResult, error) { return storePage(tx, req) })
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
	return readInTx(s, ctx, ts, req.Validate, func(tx *repo.Tx) (lk.GraphResult, error) {
		return repo.Graph(tx, req.Lock, req.Client, lk.MaxGraphNodes, ts)
	})
}

// ReadGraph is Graph read apart. A lock of the graph with waiters and a
// lease that ended by ts but is not retired yet is the exception, as for
// ReadLocks: its retirement hands the lock over, and ReadGraph answers
// ErrNeedsTx.
func (s *Service) ReadGraph(ctx context.Context, ts int64, req lk.GraphRequest) (lk.GraphResult, error) {
	return readApart(s, ctx, req.Validate, func(tx *repo.Tx) (lk.GraphResult, error) {
		out, err := repo.Graph(tx, req.Lock, req.Client, lk.MaxGraphNodes, ts)
		if errors.Is(err, repo.ErrGraphUnsettled) {
			err = ErrNeedsTx
		}
		return out, err
	})
}
