package repo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// TestGrantsMigrationBackfills: migration 00003 gives every lease live at
// the upgrade its row of grants, live, so that servers upgraded one by one
// on a shared database agree on the history of the leases they find.
func TestGrantsMigrationBackfills(t *testing.T) {
	ctx := context.Background()
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			path, old, _ := c.at(t, 2)
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

			tx, done := readTx(t, path)
			defer done()
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

// TestGrantsRecentMigration: migration 00010 keeps the history a reader
// sees. The live grants' rows of the old table give way to their leases,
// which stand for them; the ended ones stay in grants_archive (and with
// 00011 go to grants_ended), and the view grants shows each token once.
// Down, the live rows come back.
func TestGrantsRecentMigration(t *testing.T) {
	ctx := context.Background()
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			path, old, p := c.at(t, 9)
			for _, q := range []string{
				`INSERT INTO locks (name, last_token) VALUES ('L', 3)`,
				`INSERT INTO leases (lock, client, mode, token, granted_at, expires_at) VALUES ('L', 'c', 'exclusive', 3, 30, 60)`,
				`INSERT INTO grants (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token) VALUES
					('L', 1, 'a', 'exclusive', 10, 40, 20, 'released', 1), ('L', 2, 'b', 'exclusive', 20, 50, 30, 'revoked', 2),
					('L', 3, 'c', 'exclusive', 30, 60, NULL, NULL, NULL)`,
			} {
				if _, err := old.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			want := "L/3 c exclusive 30-60 live\nL/2 b exclusive 20-50 revoked@30\nL/1 a exclusive 10-40 released@20\n"

			d, err := Open(ctx, path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := d.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gs, more, err := GrantsOfLock(tx, "L", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if got := grantLinesOf(gs); got != want || more {
				t.Errorf("history after 00010:\n%s(more %v) want:\n%s", got, more, want)
			}
			tx.Rollback()
			d.Close()
			var n int
			if err := old.QueryRowContext(ctx, `SELECT count(*) FROM grants WHERE lock = 'L'`).Scan(&n); err != nil || n != 3 {
				t.Errorf("the view grants shows %d rows of L (%v), want 3", n, err)
			}

			if _, err := p.DownTo(ctx, 9); err != nil {
				t.Fatal(err)
			}
			var live int
			if err := old.QueryRowContext(ctx, `SELECT count(*) FROM grants WHERE lock = 'L' AND ended IS NULL AND token = 3`).Scan(&live); err != nil || live != 1 {
				t.Errorf("after 00010 down, the live grant has %d rows (%v), want 1", live, err)
			}
		})
	}
}

// TestGrantsEndedMigration: migration 00011 keeps the history a reader
// sees. The rows of grants_recent and grants_archive end up in
// grants_ended, and the view grants shows each token once. Down, every
// ended row is in grants_recent, where the code of 00010 reads it, and
// grants_archive is back, empty.
func TestGrantsEndedMigration(t *testing.T) {
	ctx := context.Background()
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			path, old, p := c.at(t, 10)
			const cols = `(lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)`
			for _, q := range []string{
				`INSERT INTO locks (name, last_token) VALUES ('L', 4), ('M', 1)`,
				`INSERT INTO leases (lock, client, mode, token, granted_at, expires_at) VALUES ('L', 'd', 'exclusive', 4, 40, 70)`,
				`INSERT INTO grants_archive ` + cols + ` VALUES
					('L', 1, 'a', 'exclusive', 10, 40, 20, 'released', 1), ('M', 1, 'a', 'shared', 12, 42, 22, 'lapsed', 1)`,
				`INSERT INTO grants_recent ` + cols + ` VALUES
					('L', 2, 'b', 'exclusive', 20, 50, 30, 'revoked', 2), ('L', 3, 'c', 'exclusive', 30, 60, 40, 'aborted', 3)`,
			} {
				if _, err := old.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			wantL := "L/4 d exclusive 40-70 live\nL/3 c exclusive 30-60 aborted@40\nL/2 b exclusive 20-50 revoked@30\nL/1 a exclusive 10-40 released@20\n"
			wantA := "M/1 a shared 12-42 lapsed@22\nL/1 a exclusive 10-40 released@20\n"
			history := func(when string) {
				t.Helper()
				tx, done := readTx(t, path)
				defer done()
				gs, more, err := GrantsOfLock(tx, "L", 0, 10)
				if err != nil {
					t.Fatal(err)
				}
				if got := grantLinesOf(gs); got != wantL || more {
					t.Errorf("%s: history of L:\n%s(more %v) want:\n%s", when, got, more, wantL)
				}
				gs, more, err = GrantsOfClient(tx, "a", nil, 10)
				if err != nil {
					t.Fatal(err)
				}
				if got := grantLinesOf(gs); got != wantA || more {
					t.Errorf("%s: history of a:\n%s(more %v) want:\n%s", when, got, more, wantA)
				}
			}
			history("after 00011")
			count := func(q string, want int) {
				t.Helper()
				var n int
				if err := old.QueryRowContext(ctx, q).Scan(&n); err != nil || n != want {
					t.Errorf("%s: %d (%v), want %d", q, n, err, want)
				}
			}
			count(`SELECT count(*) FROM grants`, 5)
			count(`SELECT count(*) FROM grants_ended`, 4)

			if _, err := p.DownTo(ctx, 10); err != nil {
				t.Fatal(err)
			}
			count(`SELECT count(*) FROM grants`, 5)
			count(`SELECT count(*) FROM grants_recent`, 4)
			count(`SELECT count(*) FROM grants_archive`, 0)
			// And up again, as a server of this version does at its start.
			history("after 00011 down and up")
		})
	}
}

// TestHoldTimesSkipRowsBeforeEndOrder: rows ended before migration 00005
// have no ended_after_token, and since 00011 they share grants_ended with
// the newer rows. An estimate's hold times are the lock's latest ends, on
// both dialects; PostgreSQL sorts NULLs first in a descending order, so a
// read that let them in would average the oldest holds.
func TestHoldTimesSkipRowsBeforeEndOrder(t *testing.T) {
	ctx := context.Background()
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			path, db, _ := c.at(t, 11)
			const cols = `(lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)`
			for _, q := range []string{
				`INSERT INTO locks (name, last_token) VALUES ('L', 4)`,
				`INSERT INTO grants_ended ` + cols + ` VALUES
					('L', 1, 'a', 'exclusive', 10, 900, 500, 'released', NULL),
					('L', 2, 'b', 'exclusive', 600, 900, 700, 'released', NULL),
					('L', 3, 'c', 'exclusive', 1000, 1100, 1003, 'released', 3),
					('L', 4, 'd', 'exclusive', 1010, 1100, 1015, 'released', 4)`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			tx, done := readTx(t, path)
			defer done()
			holds, err := GrantHoldTimes(tx, "L", 2)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(holds); got != "[{exclusive 5} {exclusive 3}]" {
				t.Errorf("hold times of L's last 2 ends: %s, want [{exclusive 5} {exclusive 3}]", got)
			}
		})
	}
}

// readTx opens the database at path and begins a transaction on it;
// done rolls it back and closes the database.
func readTx(t *testing.T, path string) (tx *Tx, done func()) {
	t.Helper()
	ctx := context.Background()
	d, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tx, err = d.Begin(ctx); err != nil {
		d.Close()
		t.Fatal(err)
	}
	return tx, func() { tx.Rollback(); d.Close() }
}

// TestGrantsPruneEndedBefore: pruning by age goes through the rows in the
// order they were recorded, a batch at a time, and deletes only those that
// ended before the bound: one recorded a batch or more after younger ones
// (a lapse noticed late) waits for them, and goes with them.
func TestGrantsPruneEndedBefore(t *testing.T) {
	ctx := context.Background()
	const batch = GrantsPruneBatch
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			path, db, _ := c.at(t, 12)
			// In the order recorded: batch+44 rows of L that ended at 10, a
			// batch of M's at 500, then 10 of N's at 15.
			for _, rows := range []struct {
				lock    string
				n       int
				endedAt int
			}{{"L", batch + 44, 10}, {"M", batch, 500}, {"N", 10, 15}} {
				q := fmt.Sprintf(`INSERT INTO grants_ended
					(lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
					WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d)
					SELECT '%s', i, 'c', 'exclusive', 0, %d, %d, 'released', i FROM n ORDER BY i`,
					rows.n, rows.lock, rows.endedAt, rows.endedAt)
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			tx, done := readTx(t, path)
			defer done()
			left := func() string {
				t.Helper()
				var out []string
				err := tx.each(qGrantsEndedByLock, nil, func(scan func(...any) error) error {
					var lock string
					var n int64
					err := scan(&lock, &n)
					out = append(out, fmt.Sprintf("%s:%d", lock, n))
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return strings.Join(out, " ")
			}
			for _, step := range []struct {
				before, n int64
				left      string
			}{
				{100, batch, "L:44 M:256 N:10"}, // a batch of L's
				{100, 44, "M:256 N:10"},         // the rest of L's, and none of M's
				{100, 0, "M:256 N:10"},          // N's wait behind M's
				{1000, batch, "N:10"},
				{1000, 10, ""},
			} {
				n, err := GrantsPruneEndedBefore(tx, step.before)
				if err != nil {
					t.Fatal(err)
				}
				if got := left(); n != step.n || got != step.left {
					t.Errorf("before %d: pruned %d, left %q; want %d, %q", step.before, n, got, step.n, step.left)
				}
			}
		})
	}
}

var qGrantsEndedByLock = portable("test.GrantsEndedByLock", `SELECT lock, count(*) FROM grants_ended GROUP BY lock ORDER BY lock`)

// TestGrantsPruneUsesKey: on PostgreSQL, whose prepared statements may run
// a generic plan, pruning by age walks grants_ended's key for its batch,
// and never scans the table, however many rows it has.
func TestGrantsPruneUsesKey(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, pgtest.DSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, q := range []string{
		`INSERT INTO grants_ended (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
			SELECT 'L' || (i % 100), i, 'c' || (i % 50), 'exclusive', i, i + 30, i + 10, 'released', i
			FROM generate_series(1, 20000) AS i`,
		`ANALYZE grants_ended`,
		`SET plan_cache_mode = force_generic_plan`,
		`PREPARE prune(bigint) AS ` + d.texts[qGrantsPruneEndedBefore],
	} {
		if _, err := d.conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var plan []string
	rows, err := d.conn.QueryContext(ctx, `EXPLAIN EXECUTE prune(15000)`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan") || !strings.Contains(text, "Index") {
		t.Errorf("the prune's generic plan scans grants_ended:\n%s", text)
	}
}

// TestHistoryPruneStep: the step is a sixteenth of the tokens kept, at
// least 1 and at most 64, and the bound a multiple of it, the tokens
// before the last keep rounded down.
func TestHistoryPruneStep(t *testing.T) {
	for _, c := range []struct{ keep, step int64 }{
		{1, 1}, {15, 1}, {16, 1}, {31, 1}, {32, 2}, {33, 2}, {64, 4}, {1000, 62}, {1023, 63}, {1024, 64}, {1 << 40, 64},
	} {
		if got := historyPruneStep(c.keep); got != c.step {
			t.Errorf("historyPruneStep(%d) = %d, want %d", c.keep, got, c.step)
		}
	}
	for _, c := range []struct{ last, keep, through int64 }{
		{1000, 1000, 0}, {1001, 1000, 0}, {1061, 1000, 0}, {1062, 1000, 62}, {1123, 1000, 62}, {1124, 1000, 124},
		{4, 3, 1}, {5, 3, 2}, {1, 1, 0}, {2, 1, 1},
	} {
		if got := historyPruneBound(c.last, c.keep); got != c.through {
			t.Errorf("historyPruneBound(%d, %d) = %d, want %d", c.last, c.keep, got, c.through)
		}
	}
}
