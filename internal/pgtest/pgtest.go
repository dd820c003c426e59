// Package pgtest gives each test its own empty PostgreSQL schema, so that
// tests share one server without seeing each other's tables.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/internal/pgschema"
)

// EnvVar names the server the tests use: a postgres:// URL of a database in
// which they may create schemas, or "skip".
const EnvVar = "LEASEKEEPER_TEST_POSTGRES"

const howTo = "Run `bash .ci/run`, which installs and starts a throwaway PostgreSQL; " +
	"or start one with `.ci/postgres start` and export " + EnvVar + "=<the URL it prints>. " +
	"Outside CI, " + EnvVar + "=skip skips the PostgreSQL tests."

// DSN returns the URL of a fresh, empty PostgreSQL schema for one test, dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvVar)
	switch {
	case base == "skip" && os.Getenv("CI") != "":
		// A CI run that skipped these would pass without testing PostgreSQL at all.
		t.Fatalf("pgtest: %s=skip, but CI never skips the PostgreSQL tests. %s", EnvVar, howTo)
	case base == "skip":
		t.Skipf("pgtest: skipped, since %s=skip. %s", EnvVar, howTo)
	case base == "":
		t.Fatalf("pgtest: %s is not set: this test needs a PostgreSQL server. %s", EnvVar, howTo)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, drop, err := pgschema.Fresh(ctx, base, "lktest_")
	if err != nil {
		t.Fatalf("pgtest: %s: %v\n%s", EnvVar, err, howTo)
	}
	// Cleanups run last first: a test that closes its connections in a
	// cleanup has closed them by the time this runs, so no transaction of
	// theirs still holds a lock that the drop would wait for.
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// HoldServiceRow holds the lock that every leasekeeper transaction on dsn
// takes first (the service row, FOR UPDATE), as another server's group
// would, until the returned transaction ends; conn is its connection, closed
// when the test ends.
func HoldServiceRow(t testing.TB, dsn string) (conn *pgx.Conn, tx pgx.Tx) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if tx, err = conn.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM service FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	return conn, tx
}

// WaitersAtLeast waits up to 10 s until at least n sessions wait, directly
// or behind another waiter, for a lock that conn's session holds: the
// transactions queued behind a row that conn holds FOR UPDATE, say. Other
// tests' sessions, in their own schemas of the same database, are not
// counted. A test orders what it sends by it, not by sleeps.
func WaitersAtLeast(t testing.TB, conn *pgx.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		// pg_stat_activity is read once per transaction, and conn may
		// be in one: forget that reading.
		if _, err := conn.Exec(context.Background(), `SELECT pg_stat_clear_snapshot()`); err != nil {
			t.Fatal(err)
		}
		err := conn.QueryRow(context.Background(), `WITH RECURSIVE blocked(pid) AS (
				SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
				UNION SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY(pg_blocking_pids(a.pid)))
			SELECT count(*) FROM blocked`, conn.PgConn().PID()).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d sessions waiting behind this one, want %d", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
