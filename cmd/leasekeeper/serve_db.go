package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// logDatabase logs, once at start, which database the server runs on and
// the figures that never go down while it is intact: its clock, the locks
// it knows and the highest token issued. An operator comparing them with the
// previous start sees a database that went back (a -wal lost after a crash,
// an old copy restored: docs/deployment.md), which SQLite accepts silently.
func logDatabase(ctx context.Context, log *slog.Logger, dbPath string, svc *service.Service) error {
	sum, err := svc.Summary(ctx)
	if err != nil {
		return err
	}
	where := slog.String("file", dbPath)
	if repo.IsPostgres(dbPath) {
		where = slog.String("database", displayDB(dbPath))
	}
	clock, clockUTC := slog.String("clock", "none"), slog.String("clock_utc", "none")
	if sum.ClockSet {
		clock = slog.Int64("clock", sum.Clock)
		clockUTC = slog.String("clock_utc", time.Unix(sum.Clock, 0).UTC().Format(time.RFC3339))
	}
	log.Info("database", where, clock, clockUTC, slog.Int64("locks", sum.Locks), slog.Int64("highest_token", sum.HighestToken))
	return nil
}
