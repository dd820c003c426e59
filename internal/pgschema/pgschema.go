// Package pgschema makes a fresh, empty schema in a PostgreSQL database and
// points a connection URL at it: how the tests (internal/pgtest) and the load
// generator (cmd/lkload) start every run from nothing on a shared server.
package pgschema

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fresh creates an empty schema, named prefix and random hex digits, in the
// database at base, and returns base pointed at it and the function that
// drops it. drop uses a context of its own, so that a run that was
// interrupted still cleans up.
func Fresh(ctx context.Context, base, prefix string) (dsn string, drop func() error, err error) {
	var b [8]byte
	rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	dsn, err = withSearchPath(base, schema)
	if err != nil {
		return "", nil, err
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	if err := Exec(ctx, base, "CREATE SCHEMA "+quoted); err != nil {
		return "", nil, err
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return Exec(ctx, base, "DROP SCHEMA IF EXISTS "+quoted+" CASCADE")
	}
	return dsn, drop, nil
}

// timeout bounds each statement here: a dead or hung server should fail the
// run, not stall it.
const timeout = 30 * time.Second

// Exec runs sql on a connection of its own, so that it depends on no state
// other connections were left in.
func Exec(ctx context.Context, dsn, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("cannot connect to %s: %w", Redact(dsn), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %s: %w", Redact(dsn), sql, err)
	}
	return nil
}

// withSearchPath points dsn at schema. pgx sends a parameter it does not
// know itself to the server as a run-time setting, on every connection it
// opens: so every connection of a pool lands in the schema, not just the first.
func withSearchPath(dsn, schema string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		// The keyword=value form: a later keyword wins.
		return dsn + " search_path=" + schema, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %w", Redact(dsn), err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Redact hides a URL's password; the keyword=value form is shown whole.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	switch {
	case err != nil:
		return "the database (its URL does not parse)"
	case u.Scheme != "":
		return u.Redacted()
	}
	return dsn
}
