package repo

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite schema.sql from the migrations")

// dumpSchema returns the schema the migrations leave behind, as sqlite3's
// .schema would print it, without goose's own bookkeeping.
func dumpSchema(t *testing.T) string {
	t.Helper()
	d, err := Open(context.Background(), MemoryPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var stmts []string
	err = d.conn.SelectContext(context.Background(), &stmts, `SELECT sql FROM sqlite_master
		WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'goose_%'
		ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	return "-- The schema after all migrations (migrations/sqlite), as SQLite stores it.\n" +
		"-- Generated: go test ./repo -run TestSchemaMatchesMigrations -update\n\n" +
		strings.Join(stmts, ";\n\n") + ";\n"
}

// TestSchemaMatchesMigrations keeps schema.sql, the schema a reader looks at,
// equal to what the migrations really create.
func TestSchemaMatchesMigrations(t *testing.T) {
	path := filepath.Join("..", "schema.sql")
	got := dumpSchema(t)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with -update)", err)
	}
	if string(want) != got {
		t.Errorf("schema.sql differs from the migrations; regenerate it with -update and review the diff.\nmigrations give:\n%s", got)
	}
}

// TestMigrationsReopen: opening an existing file applies nothing twice.
func TestMigrationsReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	for i := 0; i < 2; i++ {
		d, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		d.Close()
	}
}
