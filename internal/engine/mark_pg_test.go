package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
)

// TestMarkPostgresRollback: on PostgreSQL, a server with a mark refuses a
// database whose counters went back (a point-in-time restore, a failover to
// an asynchronous standby), and with AcceptRollback moves the shared
// counters past its mark, for the locks the restore forgot too.
func TestMarkPostgresRollback(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	mark := filepath.Join(t.TempDir(), "pg.mark")
	e, err := Open(ctx, dsn, Options{Mark: mark})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 3 {
		last = takeOnce(t, e, "a", "L")
		takeOnce(t, e, "a", "forgotten")
	}
	e.Close()

	// A lock created after the restore point: gone with its rows.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `DELETE FROM grants_ended WHERE lock = 'forgotten'; DELETE FROM locks WHERE name = 'forgotten'`)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The restore: the event counter back to its start.
	r := openTestRunner(t, dsn)
	r.mu.Lock()
	tx, err := r.begin(ctx, repo.Warm{})
	if err == nil {
		c := r.st.Counters
		c.EventID = 1
		err = repo.ServiceCountersSet(tx, c)
	}
	if err == nil {
		err = tx.Commit()
	}
	r.mu.Unlock()
	r.close()
	if err != nil {
		t.Fatal(err)
	}

	_, err = Open(ctx, dsn, Options{Mark: mark})
	var rb *RollbackError
	if !errors.As(err, &rb) || !strings.Contains(err.Error(), "event id 1") || !strings.Contains(err.Error(), "--accept-rollback") {
		t.Fatalf("Open on the restored database: %v, want a *RollbackError naming the event id", err)
	}
	e, err = Open(ctx, dsn, Options{Mark: mark, AcceptRollback: true})
	if err != nil {
		t.Fatal(err)
	}
	// Accepted, and nothing done: the next start finds the database at
	// its mark, and the floor in the service row.
	e.Close()
	e, err = Open(ctx, dsn, Options{Mark: mark})
	if err != nil {
		t.Fatalf("a start after the accepted rollback: %v", err)
	}
	defer e.Close()
	// The mark reserved a block past the database's 0 at the first start.
	if got := takeOnce(t, e, "a", "L"); got <= markBlock || got <= last {
		t.Errorf("acquire after the accepted rollback: token %d; want a token past the mark's reservation, %d", got, markBlock)
	}
	// Twice: the lock's row must start at its first token, not at 1
	// under a lease of floor+1.
	for i := range 2 {
		if got := takeOnce(t, e, "b", "forgotten"); got <= markBlock {
			t.Errorf("acquire %d of a lock the restore forgot, after the accepted rollback: token %d; want a token past the mark's reservation, %d (its tokens 1 to 3 were issued)", i+1, got, markBlock)
		}
	}
}
