package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/fence"
)

func TestSplitSQL(t *testing.T) {
	for _, c := range []struct {
		d    fence.Dialect
		in   string
		want []string
	}{
		{fence.SQLite, "INSERT INTO t VALUES (1); INSERT INTO t VALUES ('a;b')", []string{"INSERT INTO t VALUES (1)", "INSERT INTO t VALUES ('a;b')"}},
		{fence.SQLite, "UPDATE t SET x = 'it''s; fine';;\n-- a comment; with a semicolon\n", []string{"UPDATE t SET x = 'it''s; fine'"}},
		{fence.SQLite, `/* one; */ DELETE FROM "odd;name"`, []string{`/* one; */ DELETE FROM "odd;name"`}},
		{fence.Postgres, "DO $$ BEGIN PERFORM 1; END $$; SELECT 2", []string{"DO $$ BEGIN PERFORM 1; END $$", "SELECT 2"}},
		{fence.Postgres, "SELECT $tag$ ; $tag$, $1", []string{"SELECT $tag$ ; $tag$, $1"}},
		{fence.MySQL, `INSERT INTO t VALUES ('a\';b'); # note; here` + "\nSELECT `x;y` FROM t", []string{`INSERT INTO t VALUES ('a\';b')`, "# note; here\nSELECT `x;y` FROM t"}},
	} {
		got, err := splitSQL(c.in, c.d)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: splitSQL(%q) = %q, %v; want %q", c.d, c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"SELECT 'open", "SELECT 1 /* open", `SELECT "open`} {
		if _, err := splitSQL(bad, fence.SQLite); err == nil {
			t.Errorf("splitSQL(%q) accepted an unclosed quote or comment", bad)
		}
	}
}

func TestRefuseStatement(t *testing.T) {
	for _, c := range []struct {
		d      fence.Dialect
		stmt   string
		refuse bool
	}{
		{fence.Postgres, "INSERT INTO t VALUES (1)", false},
		{fence.Postgres, "begin", true},
		{fence.Postgres, "  -- why\n COMMIT", true},
		{fence.Postgres, "/* x */ rollback to savepoint a", true},
		{fence.Postgres, "SAVEPOINT a", true},
		{fence.Postgres, "RELEASE SAVEPOINT a", true},
		{fence.Postgres, "END", true},
		{fence.Postgres, "ABORT", true},
		{fence.Postgres, "START TRANSACTION", true},
		{fence.Postgres, "PREPARE TRANSACTION 'x'", true},
		{fence.Postgres, "PREPARE q AS SELECT 1", false},
		{fence.Postgres, "CREATE TEMP TABLE x (a int)", false}, // transactional DDL
		{fence.SQLite, "CREATE TABLE x (a)", false},
		{fence.MySQL, "CREATE TABLE x (a int)", true},
		{fence.MySQL, "alter table t add column b int", true},
		{fence.MySQL, "TRUNCATE t", true},
		{fence.MySQL, "LOCK TABLES t WRITE", true},
		{fence.MySQL, "SET autocommit = 1", true},
		{fence.MySQL, "SET @x = 1", false},
		{fence.MySQL, "XA START 'x'", true},
		{fence.MySQL, "LOAD DATA INFILE 'f' INTO TABLE t", false},
		{fence.MySQL, "UPDATE t SET a = 1", false},
	} {
		err := refuseStatement(c.stmt, c.d)
		if (err != nil) != c.refuse {
			t.Errorf("%s: refuseStatement(%q) = %v; want refused: %v", c.d, c.stmt, err, c.refuse)
		}
		if err != nil && !strings.Contains(err.Error(), "nothing was run") {
			t.Errorf("%q: %v", c.stmt, err)
		}
	}
}

func TestDialectOf(t *testing.T) {
	for dsn, want := range map[string]fence.Dialect{
		"postgres://u@h/db":              fence.Postgres,
		"postgresql://u@h/db":            fence.Postgres,
		"mysql://u:p@tcp(h:3306)/db":     fence.MySQL,
		"jobs.db":                        fence.SQLite,
		"file:jobs.db?mode=rw":           fence.SQLite,
		"/var/lib/jobs/warehouse.sqlite": fence.SQLite,
	} {
		if got, err := dialectOf(dsn); err != nil || got != want {
			t.Errorf("dialectOf(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
	for _, bad := range []string{"", "u:p@tcp(h:3306)/db", "u@unix(/run/mysqld.sock)/db"} {
		if _, err := dialectOf(bad); err == nil {
			t.Errorf("dialectOf(%q) accepted", bad)
		}
	}
}
