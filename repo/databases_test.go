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

	"github.com/pressly/goose/v3"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// reopenableDB is a database of one dialect that a test can open more
// than once, through Open or apart from it: a SQLite file, or a new
// PostgreSQL schema, with its database/sql driver and its dialect, goose's
// and ours.
type reopenableDB struct {
	name, driver string
	goose        goose.Dialect
	dialect      dialect
	path         func(testing.TB) string
}

var reopenable = []reopenableDB{
	{"sqlite", "sqlite", goose.DialectSQLite3, sqliteDialect{}, func(t testing.TB) string { return filepath.Join(t.TempDir(), "lk.db") }},
	{"postgres", "pgx", goose.DialectPostgres, postgresDialect{}, pgtest.DSN},
}

// at returns a new database of c's dialect, migrated up to version, open,
// and goose's provider to move it further up or down.
func (c reopenableDB) at(t *testing.T, version int64) (path string, db *sql.DB, p *goose.Provider) {
	t.Helper()
	path = c.path(t)
	fsys := migrations.SQLite()
	if c.driver == "pgx" {
		fsys = migrations.Postgres()
	}
	db, err := sql.Open(c.driver, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if p, err = goose.NewProvider(c.goose, db, fsys); err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return path, db, p
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
			dsn := c.path(t)
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
			raw, err := sql.Open(c.driver, dsn)
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
