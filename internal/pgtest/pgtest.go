// Package pgtest gives each test its own empty PostgreSQL schema, so that
// tests share one server without seeing each other's tables.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

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
