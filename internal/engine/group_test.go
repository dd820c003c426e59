package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgschema"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/sqlitetest"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestGroupFailsWhole: the operations of a group have no savepoints, on
// either database, so when one fails (here: its table is gone) the group
// commits nothing, not even the operations before it that succeeded, and
// says so; the operations after it do not run at all (on SQLite, a
// failure may have ended the transaction, and their statements would
// commit one by one).
func TestGroupFailsWhole(t *testing.T) {
	for _, b := range []struct {
		name string
		dsn  func(t *testing.T) string
		// exec runs one statement on the database from a connection of
		// its own.
		exec func(ctx context.Context, dsn, stmt string) error
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "group.db") }, sqlitetest.Exec},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }, pgschema.Exec},
	} {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			r := openTestRunner(t, dsn)
			ctx := context.Background()
			rename := func(stmt string) {
				t.Helper()
				if err := b.exec(ctx, dsn, stmt); err != nil {
					t.Fatal(err)
				}
			}
			rename(`ALTER TABLE store_values RENAME TO store_values_away`)
			var acqErr, writeErr, afterErr error
			err := r.groupRun(ctx, nil, func() {
				_, acqErr = exec(r, ctx, 0, lk.AcquireRequest{Client: "x", Lock: "L", TTL: 10, Mode: lk.Exclusive}, service.Acquire)
				_, writeErr = exec(r, ctx, 1, lk.WriteRequest{Lock: "L", Key: "k", Value: "v", Token: 1},
					func(op *service.Op, q lk.WriteRequest) (lk.WriteResult, error) { return service.Write(op, q, nil) })
				_, afterErr = exec(r, ctx, 1, lk.AcquireRequest{Client: "y", Lock: "M", TTL: 10, Mode: lk.Exclusive}, service.Acquire)
			})
			if acqErr != nil || writeErr == nil || err == nil {
				t.Fatalf("acquire: %v, write: %v, group: %v; want the write and so the group to fail", acqErr, writeErr, err)
			}
			if !errors.Is(afterErr, errGroupFailed) {
				t.Errorf("the acquire after the failed write: %v, want it not run (%v)", afterErr, errGroupFailed)
			}
			rename(`ALTER TABLE store_values_away RENAME TO store_values`)
			for _, lock := range []string{"L", "M"} {
				in, err := exec(r, ctx, 2, lk.InspectRequest{Lock: lock}, service.Inspect)
				if err != nil {
					t.Fatal(err)
				}
				if len(in.Holders) != 0 {
					t.Errorf("the failed group's acquire of %s was committed: %+v", lock, in)
				}
			}
			if ts, _ := r.clock(); ts != 2 {
				t.Errorf("clock %d after the failed group and an inspect at 2", ts)
			}
		})
	}
}
