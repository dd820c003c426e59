package repo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryStatementPrepares prepares every registered statement, as each
// dialect renders it, on its database: a statement one of them cannot
// parse, or one that refers to what the migrations do not create, fails
// here rather than in the first operation that runs it.
func TestEveryStatementPrepares(t *testing.T) {
	ctx := context.Background()
	onEachDatabase(t, func(t *testing.T, name string, d *DB) {
		if d.dialect.String() != name {
			t.Fatalf("Open chose the %s dialect", d.dialect)
		}
		prepare := func(name, text string) {
			t.Helper()
			s, err := d.conn.PrepareContext(ctx, text)
			if err != nil {
				t.Errorf("statement %s does not prepare on %s: %v\n%s", name, name, err, text)
				return
			}
			s.Close()
		}
		n := 0
		for i, text := range d.texts {
			if text != "" {
				prepare(registry[i].name, text)
				n++
			}
		}
		if d.dialect.peers() {
			// LISTEN is not registered (its channel is an identifier):
			// the channel of this schema, one with a quote, one hashed for length.
			prepare("Listen", d.dialect.listen(d.channel))
			prepare("Listen.quoted", d.dialect.listen(notifyChannel(`we"ird?`)))
			prepare("Listen.long", d.dialect.listen(notifyChannel(strings.Repeat("s", 60))))
		}
		t.Logf("%d of %d registered statements prepared on %s", n, len(registry), name)
	})
}

// TestEveryStatementHasADialect: a statement that no dialect gives is dead
// or a mistake; one that both give must differ for a reason.
func TestEveryStatementHasADialect(t *testing.T) {
	lite, err := render(sqliteDialect{})
	if err != nil {
		t.Fatal(err)
	}
	pg, err := render(postgresDialect{})
	if err != nil {
		t.Fatal(err)
	}
	if len(registry) < 40 {
		t.Errorf("only %d statements registered", len(registry))
	}
	for i, def := range registry {
		if lite[i] == "" && pg[i] == "" {
			t.Errorf("statement %s: neither dialect has it", def.name)
		}
	}
}

func TestScanParams(t *testing.T) {
	for _, c := range []struct{ text, postgres string }{
		{`SELECT ?, ?`, `SELECT $1, $2`},
		{`SELECT ?1, ?2, ?1`, `SELECT $1, $2, $1`},
		{`SELECT 'it''s', "a""b", ?`, `SELECT 'it''s', "a""b", $1`},
		{"-- a comment\nSELECT ?", "-- a comment\nSELECT $1"},
		{`SELECT /* a comment */ ?10, ?9, ?8, ?7, ?6, ?5, ?4, ?3, ?2, ?1`,
			`SELECT /* a comment */ $10, $9, $8, $7, $6, $5, $4, $3, $2, $1`},
		{`SELECT x::float8 FROM t WHERE a = ?`, `SELECT x::float8 FROM t WHERE a = $1`},
		{`SELECT 1`, `SELECT 1`},
	} {
		got, err := bind(postgresDialect{}, c.text)
		if err != nil || got != c.postgres {
			t.Errorf("bind(postgres, %q) = %q, %v; want %q", c.text, got, err, c.postgres)
		}
		if got, err := bind(sqliteDialect{}, c.text); err != nil || got != c.text {
			t.Errorf("bind(sqlite, %q) = %q, %v; want it unchanged", c.text, got, err)
		}
	}
	for _, text := range []string{
		`SELECT '?'`,
		`SELECT 'it''s ?'`,
		`SELECT ? FROM t WHERE a = 'why?'`,
		`SELECT "a?b" FROM t`,
		"SELECT 1 -- why?\n",
		"SELECT 1 -- why?",
		`SELECT /* ? */ 1`,
		`SELECT ?1, ?`,
		`SELECT ?, ?2`,
		`SELECT ?2`,
		`SELECT ?1, ?3`,
		`SELECT ?0`,
		`SELECT $1`,
		`SELECT $$?$$`,
		`SELECT E'\'?'`,
		`SELECT 'a\b', ?`,
		`SELECT 'open`,
		`SELECT "open`,
		`SELECT /* open`,
		`SELECT /* /* nested */ */ 1`,
	} {
		for _, d := range []dialect{sqliteDialect{}, postgresDialect{}} {
			if got, err := bind(d, text); err == nil {
				t.Errorf("bind(%s, %q) = %q, want an error", d, text, got)
			}
		}
	}
}

// TestRegistryClosed: a statement cannot be put together at run time.
func TestRegistryClosed(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("shared after initialization did not panic")
		}
	}()
	portable("late", `SELECT 1`)
}

// TestSQLiteWriterPragmas: the writer's connection to a file runs in WAL
// mode with the synchronous level asked for (serve asks FULL: each commit
// is synced before it is answered, docs/deployment.md) and checkpoints
// every walAutocheckpoint pages (docs/performance.md, "SQLite: a
// checkpoint every 10,000 pages").
func TestSQLiteWriterPragmas(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "lk.db"), Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		pragma, want string
	}{{"journal_mode", "wal"}, {"synchronous", "2"}, {"wal_autocheckpoint", "10000"},
		// No shrinking of the WAL while the file is open, which growWAL counts on for speed.
		{"journal_size_limit", "-1"}} {
		var got string
		if err := d.conn.GetContext(ctx, &got, "PRAGMA "+c.pragma); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("PRAGMA %s = %s on the writer's connection, want %s", c.pragma, got, c.want)
		}
	}
}
