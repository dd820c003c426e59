package repo

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// TestStoreUsageMigration: a database written before the store kept its
// usage (migration 2) gets each lock's keys and bytes counted when it is
// opened, so that a quota holds from the first write after the upgrade.
func TestStoreUsageMigration(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		dsn     func(t *testing.T) string
		raw     func(t *testing.T, dsn string) *sql.DB
		dialect goose.Dialect
		fsys    func() fs.FS
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "v1.db") },
			func(t *testing.T, dsn string) *sql.DB {
				db, err := sql.Open("sqlite", "file:"+escapePath(dsn))
				if err != nil {
					t.Fatal(err)
				}
				return db
			}, goose.DialectSQLite3, migrations.SQLite},
		{"postgres", func(t *testing.T) string { return pgtest.DSN(t) },
			func(t *testing.T, dsn string) *sql.DB {
				cfg, err := pgx.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				return stdlib.OpenDB(*cfg)
			}, goose.DialectPostgres, migrations.Postgres},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.dsn(t)
			raw := c.raw(t, dsn)
			p, err := goose.NewProvider(c.dialect, raw, c.fsys())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 1); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`INSERT INTO store_fences (lock, highest_token) VALUES ('L', 3), ('M', 1), ('N', 2)`,
				`INSERT INTO store_values (lock, key, value, token, written_at) VALUES
					('L', 'k1', 'héllo', 3, 0), ('L', 'k2', '', 2, 0), ('M', 'k', 'v', 1, 0)`,
			} {
				if _, err := raw.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			raw.Close()

			tx, done := readTx(t, dsn)
			defer done()
			for _, w := range []struct {
				lock, key string
				want      StoreWriteState
			}{
				{"L", "k1", StoreWriteState{Fenced: true, Highest: 3, Keys: 2, Bytes: 2 + 6 + 2, KeyExists: true, EntryBytes: 2 + 6}},
				{"L", "k3", StoreWriteState{Fenced: true, Highest: 3, Keys: 2, Bytes: 2 + 6 + 2}},
				{"M", "k", StoreWriteState{Fenced: true, Highest: 1, Keys: 1, Bytes: 2, KeyExists: true, EntryBytes: 2}},
				{"N", "k", StoreWriteState{Fenced: true, Highest: 2}},
				{"O", "k", StoreWriteState{}},
			} {
				got, err := StoreWriteStateGet(tx, w.lock, w.key)
				if err != nil {
					t.Fatal(err)
				}
				if got != w.want {
					t.Errorf("(%s, %s): %+v, want %+v", w.lock, w.key, got, w.want)
				}
			}
		})
	}
}

// TestStoreUsageCounted: StoreFenceRaise keeps each lock's keys and bytes
// equal to a count of its values, through new keys, overwrites longer and
// shorter, multi-byte text and stale tokens that change nothing.
func TestStoreUsageCounted(t *testing.T) {
	ctx := context.Background()
	onEachDatabase(t, func(t *testing.T, name string, d *DB) {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		rng := rand.New(rand.NewPCG(12, 34))
		values := []string{"v", "value", "été", strings.Repeat("x", 300), "日本語のテキスト"}
		for i := range 2000 {
			lock := fmt.Sprintf("L%d", rng.IntN(7))
			key := fmt.Sprintf("k%d", rng.IntN(20))
			value := values[rng.IntN(len(values))]
			token := int64(1 + rng.IntN(i/100+1)) // rising, with stale ones among them
			ok, err := StoreFenceRaise(tx, lock, key, token, int64(len(key)+len(value)))
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if err := StoreValuePut(tx, lock, key, value, "", token, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		var counted []struct {
			Lock  string `db:"lock"`
			Keys  int64  `db:"keys"`
			Bytes int64  `db:"bytes"`
		}
		if err := d.conn.SelectContext(ctx, &counted, `SELECT lock, count(*) AS keys,
			sum(octet_length(key) + octet_length(value)) AS bytes FROM store_values GROUP BY lock`); err != nil {
			t.Fatal(err)
		}
		if len(counted) != 7 {
			t.Fatalf("%d locks written, want 7", len(counted))
		}
		for _, w := range counted {
			st, err := StoreWriteStateGet(tx, w.Lock, "none")
			if err != nil {
				t.Fatal(err)
			}
			if st.Keys != w.Keys || st.Bytes != w.Bytes {
				t.Errorf("%s: kept %d keys, %d bytes; its values are %d keys, %d bytes", w.Lock, st.Keys, st.Bytes, w.Keys, w.Bytes)
			}
		}
	})
}
