package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// reopenable are a database of each dialect that a test can open more than
// once: a SQLite file, and a new PostgreSQL schema.
var reopenable = []struct {
	name string
	dsn  func(testing.TB) string
}{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "lk.db") }},
	{"postgres", pgtest.DSN},
}

// onEachDatabase runs fn as a subtest on a fresh database of each dialect:
// SQLite in memory, and a new PostgreSQL schema.
func onEachDatabase(t *testing.T, fn func(t *testing.T, name string, d *DB)) {
	for _, c := range []struct {
		name string
		dsn  func(testing.TB) string
	}{
		{"sqlite", func(testing.TB) string { return MemoryPath }},
		{"postgres", pgtest.DSN},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(context.Background(), c.dsn(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			fn(t, c.name, d)
		})
	}
}

// TestOpenRefusesNewerSchema: a database that a newer version migrated
// past the embedded migrations is refused with ErrNewerSchema, naming both
// versions, and left as it was; it opens again once the newer version's
// mark is gone. Without the check, goose skips the unknown version and
// Open serves a schema its statements may not fit.
func TestOpenRefusesNewerSchema(t *testing.T) {
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dsn := c.dsn(t)
			d, err := Open(ctx, dsn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			mark := func(q string) {
				t.Helper()
				if _, err := d.conn.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			mark(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, TRUE)`)
			d.Close()
			_, err = Open(ctx, dsn, Options{})
			if !errors.Is(err, ErrNewerSchema) || !strings.Contains(err.Error(), "migration 9999") ||
				!strings.Contains(err.Error(), fmt.Sprintf("up to %d", lastMigration(t))) {
				t.Fatalf("Open of a database at migration 9999: %v, want ErrNewerSchema naming 9999 and %d", err, lastMigration(t))
			}
			// Nothing was changed: the mark is still there, and without it
			// the database opens.
			raw, err := sql.Open(map[string]string{"sqlite": "sqlite", "postgres": "pgx"}[c.name], dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.ExecContext(ctx, `DELETE FROM goose_db_version WHERE version_id = 9999`); err != nil {
				t.Fatal(err)
			}
			raw.Close()
			if d, err = Open(ctx, dsn, Options{}); err != nil {
				t.Fatalf("Open once the newer mark is gone: %v", err)
			}
			d.Close()
		})
	}
}

// lastMigration is the highest version among the embedded SQLite
// migrations (PostgreSQL's has the same versions).
func lastMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrations.SQLite(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, e := range entries {
		if v, err := strconv.ParseInt(strings.SplitN(e.Name(), "_", 2)[0], 10, 64); err == nil {
			last = max(last, v)
		}
	}
	return last
}
