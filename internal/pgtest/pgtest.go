// Package pgtest gives each test its own empty PostgreSQL schema, so that
// tests share one server without seeing each other's tables.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the server the tests use: a postgres:// URL of a database in
// which they may create schemas, or "skip".
const EnvVar = "LEASEKEEPER_TEST_POSTGRES"

const howTo = "Run `bash .ci/run`, which installs and starts a throwaway PostgreSQL; " +
	"or start one with `.ci/postgres start` and export " + EnvVar + "=<the URL it prints>. " +
	"Outside CI, " + EnvVar + "=skip skips the PostgreSQL tests."

// A dead or hung server should fail the test, not stall it until go test's
// own timeout, which reports nothing useful.
const timeout = 30 * time.Second

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

	var b [8]byte
	rand.Read(b[:])
	schema := "lktest_" + hex.EncodeToString(b[:])

	exec(t, base, "CREATE SCHEMA "+schema)
	// Cleanups run last first: a test that closes its connections in a
	// cleanup has closed them by the time this runs, so no transaction of
	// theirs still holds a lock that the drop would wait for.
	t.Cleanup(func() { exec(t, base, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return withSearchPath(t, base, schema)
}

// exec uses a connection of its own, so that neither making nor dropping the
// schema depends on the state the test left its connections in.
func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: cannot connect to %s (%s): %v\n%s", EnvVar, redact(dsn), err, howTo)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// withSearchPath points dsn at schema. pgx sends a parameter it does not
// know itself to the server as a run-time setting, on every connection it
// opens: so every connection of a pool lands in the schema, not just the first.
func withSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		// The keyword=value form: a later keyword wins.
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL: %v", EnvVar, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// redact hides a password in a URL; the keyword=value form is shown whole,
// since a test server's URL rarely carries one.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return dsn
}
