package service

import (
	"context"

	"github.com/leasekeeper/leasekeeper/repo"
)

// The metrics' gauges that read the database at each scrape, beside
// Counts and ReadCounts.

// ReadOldestWait is OldestWait read apart: the same answer, from the last
// committed state. A waiter whose lock a lapse not yet retired would hand
// over is still counted: the gauges count what they read.
func (s *Service) ReadOldestWait(ctx context.Context, ts int64) (int64, error) {
	return readApart(s, ctx, noValidation, func(tx *repo.Tx) (int64, error) { return oldestWait(tx, ts) })
}

// OldestWait returns how long, in seconds at ts, the client that has waited
// longest in any queue has waited; 0 when nobody waits. It costs one index
// lookup (repo.QueueOldest), however many wait.
func (s *Service) OldestWait(ctx context.Context, ts int64) (int64, error) {
	return readInTx(s, ctx, ts, noValidation, func(tx *repo.Tx) (int64, error) { return oldestWait(tx, ts) })
}

func oldestWait(tx *repo.Tx, ts int64) (int64, error) {
	queuedAt, found, err := repo.QueueOldest(tx)
	if err != nil || !found {
		return 0, err
	}
	return max(ts-queuedAt, 0), nil
}

func noValidation() error { return nil }
