package repo

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// TestGrantWritesBuildNoTemporaryTable: on SQLite, no statement that writes
// a grant's row builds a temporary B-tree for each run. A CHECK of the form
// `ended IN (four constants)` did (migrations/sqlite/00006_grants_check.sql):
// about a third of what a grant's INSERT cost, on every grant of every
// scale scenario.
func TestGrantWritesBuildNoTemporaryTable(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// GrantsLapse's are built once per sweep, not per row.
	for s, allowed := range map[statement]int{qGrantInsertEnded: 0, qGrantEnd: 0, qGrantsLapse: 2} {
		ps, err := scanParams(d.texts[s])
		if err != nil {
			t.Fatal(err)
		}
		args := []any{}
		for _, p := range ps {
			for len(args) < p.n {
				args = append(args, nil)
			}
		}
		rows, err := d.conn.QueryxContext(ctx, "EXPLAIN "+d.texts[s], args...)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		var ops []string
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			op, _ := m["opcode"].(string)
			ops = append(ops, op)
		}
		rows.Close()
		if len(ops) == 0 {
			t.Fatalf("%s: EXPLAIN gave no program", s)
		}
		n := 0
		for _, op := range ops {
			if op == "OpenEphemeral" {
				n++
			}
		}
		if n > allowed {
			t.Errorf("%s builds %d temporary B-trees at every run, %d expected (%s):\n%s", s, n, allowed, d.texts[s], strings.Join(ops, " "))
		}
	}
}

// TestGrantsCheckMigration: migration 00006 keeps every row of grants, and
// its check accepts and refuses what 00003's did.
func TestGrantsCheckMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, old, migrations.SQLite())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `INSERT INTO grants (lock, token, client, mode, granted_at, expires_at, ended_at, ended) VALUES
		('L', 1, 'a', 'exclusive', 10, 40, 20, 'released'), ('L', 2, 'b', 'shared', 20, 50, 50, 'lapsed'),
		('L', 3, 'c', 'shared', 21, 51, 30, 'revoked'), ('L', 4, 'd', 'exclusive', 60, 90, 61, 'aborted'),
		('L', 5, 'e', 'exclusive', 61, 91, NULL, NULL)`); err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	// Up to 00009, the last with grants as a table (00010 makes it a view).
	if _, err := p.UpTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	rows, err := old.QueryContext(ctx, `SELECT lock, token, client, mode, granted_at, expires_at, coalesce(ended, 'live'), coalesce(ended_at, 0)
		FROM grants ORDER BY token DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var lock, client, mode, ended string
		var token, granted, expires, endedAt int64
		if err := rows.Scan(&lock, &token, &client, &mode, &granted, &expires, &ended, &endedAt); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&got, "%s/%d %s %s %d-%d %s@%d\n", lock, token, client, mode, granted, expires, ended, endedAt)
	}
	rows.Close()
	want := "L/5 e exclusive 61-91 live@0\nL/4 d exclusive 60-90 aborted@61\nL/3 c shared 21-51 revoked@30\n" +
		"L/2 b shared 20-50 lapsed@50\nL/1 a exclusive 10-40 released@20\n"
	if got.String() != want {
		t.Errorf("grants after migration 00006:\n%swant:\n%s", got.String(), want)
	}
	for _, c := range []struct {
		ended string
		ok    bool
	}{{"'released'", true}, {"'lapsed'", true}, {"'revoked'", true}, {"'aborted'", true}, {"NULL", true},
		{"'finished'", false}, {"''", false}, {"'Released'", false}} {
		_, err := old.ExecContext(ctx, `UPDATE grants SET ended = `+c.ended+` WHERE lock = 'L' AND token = 5`)
		if (err == nil) != c.ok {
			t.Errorf("ended = %s: error %v, want accepted %v", c.ended, err, c.ok)
		}
	}
	_, err = old.ExecContext(ctx, `INSERT INTO grants (lock, token, client, mode, granted_at, expires_at) VALUES ('L', 6, 'f', 'both', 1, 2)`)
	if err == nil {
		t.Error("mode 'both' accepted")
	}
}

// BenchmarkGrantWrites: what writing the history costs per operation on
// SQLite, each write in its own transaction as `leasekeeper run` makes
// them, with 20,000 rows over 3,000 locks already ended: an end's row
// (a grant writes none, its lease is its row). Compare with the lease's own
// writes (BenchmarkStatement) and see docs/performance.md, "History
// without moves".
func BenchmarkGrantWrites(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, MemoryPath, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	locks := make([]string, 3000)
	for i := range locks {
		locks[i] = fmt.Sprintf("lock-%06d", i)
	}
	row := func(i int) LeaseRow {
		return LeaseRow{Lock: locks[i%len(locks)], Client: fmt.Sprintf("client-%06d", i), Mode: lk.Exclusive,
			Token: int64(i), GrantedAt: int64(i), ExpiresAt: int64(i + 30)}
	}
	in := func(f func(tx *Tx) error) {
		tx, err := d.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := f(tx); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for ; n < 20000; n++ {
		in(func(tx *Tx) error { return grantEnd(tx, row(n), lk.EndReleased, int64(n+5)) })
	}
	b.Run("end", func(b *testing.B) {
		for b.Loop() {
			in(func(tx *Tx) error { return grantEnd(tx, row(n), lk.EndReleased, int64(n+5)) })
			n++
		}
	})
}
