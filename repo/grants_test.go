package repo

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/pressly/goose/v3"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// TestGrantsMigrationBackfills: migration 00003 gives every lease live at
// the upgrade its row of grants, live, so that servers upgraded one by one
// on a shared database agree on the history of the leases they find.
func TestGrantsMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, driver string
		dialect      goose.Dialect
		fsys         func() (path string)
	}{
		{"sqlite", "sqlite", goose.DialectSQLite3, func() string { return filepath.Join(t.TempDir(), "old.db") }},
		{"postgres", "pgx", goose.DialectPostgres, func() string { return pgtest.DSN(t) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.fsys()
			fsys := migrations.SQLite()
			if c.driver == "pgx" {
				fsys = migrations.Postgres()
			}
			old, err := sql.Open(c.driver, path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := goose.NewProvider(c.dialect, old, fsys)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 2); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`INSERT INTO locks (name, last_token) VALUES ('L', 7), ('M', 2)`,
				`INSERT INTO leases (lock, client, mode, token, granted_at, expires_at) VALUES
					('L', 'a', 'shared', 6, 100, 200), ('L', 'b', 'shared', 7, 110, 210), ('M', 'a', 'exclusive', 2, 50, 500)`,
			} {
				if _, err := old.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			old.Close()

			d, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			tx, err := d.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for lock, want := range map[string]string{
				"L": "L/7 b shared 110-210 live\nL/6 a shared 100-200 live\n",
				"M": "M/2 a exclusive 50-500 live\n",
			} {
				gs, more, err := GrantsOfLock(tx, lock, 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				if got := grantLinesOf(gs); got != want || more {
					t.Errorf("grants of %s after the upgrade:\n%s(more %v) want:\n%s", lock, got, more, want)
				}
			}
		})
	}
}

func grantLinesOf(gs []lk.GrantRecord) string {
	var b strings.Builder
	for _, g := range gs {
		end := "live"
		if g.Ended != nil && g.EndedAt != nil {
			end = fmt.Sprintf("%s@%d", *g.Ended, *g.EndedAt)
		} else if g.Ended != nil || g.EndedAt != nil {
			end = "half-ended"
		}
		fmt.Fprintf(&b, "%s/%d %s %s %d-%d %s\n", g.Lock, g.Token, g.Client, g.Mode, g.GrantedAt, g.ExpiresAt, end)
	}
	return b.String()
}
