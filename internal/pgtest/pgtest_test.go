package pgtest_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestDSNFreshSchemaDroppedAfterTest(t *testing.T) {
	ctx := context.Background()
	var schema string
	t.Run("test", func(t *testing.T) {
		conn := connect(t, pgtest.DSN(t))
		// current_schema() is the first schema on the search path that
		// exists: this tells both that search_path reached the server and
		// that the schema was made.
		if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "lktest_") {
			t.Fatalf("current_schema() = %q, want a fresh lktest_ schema", schema)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = $1::regnamespace", schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("fresh schema %s has %d relations", schema, n)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE widgets (id int)"); err != nil {
			t.Fatal(err)
		}
		var in string
		if err := conn.QueryRow(ctx, "SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 'widgets'::regclass").Scan(&in); err != nil {
			t.Fatal(err)
		}
		if in != schema {
			t.Fatalf("unqualified CREATE TABLE landed in %q, want %q", in, schema)
		}
	})
	if schema == "" {
		return // the subtest failed or skipped, and said why
	}
	var exists bool
	conn := connect(t, os.Getenv(pgtest.EnvVar))
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s outlived its test", schema)
	}
}

// The backend reaches PostgreSQL through database/sql, whose pool opens
// connections as it needs them: each one must land in the schema, not only
// the first.
func TestDSNEveryPooledConnectionInSchema(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var want string
	for i := range 3 {
		// Holding each connection makes the pool open the next one anew.
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var got string
		if err := c.QueryRowContext(ctx, "SELECT current_schema()").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, "lktest_") {
			t.Fatalf("connection %d: current_schema() = %q, want a fresh lktest_ schema", i, got)
		}
		if i == 0 {
			want = got
		}
		if got != want {
			t.Fatalf("connection %d: current_schema() = %q, want %q as the first", i, got, want)
		}
	}
}

func TestDSNSchemasDistinct(t *testing.T) {
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two calls returned the same DSN %s", a)
	}
	// Same table name in both: each test may create what it likes.
	for _, dsn := range []string{a, b} {
		if _, err := connect(t, dsn).Exec(context.Background(), "CREATE TABLE widgets (id int)"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelperDSN is run by TestDSNWithoutServer in a child process, whose
// environment it controls; run directly, it does nothing.
func TestHelperDSN(t *testing.T) {
	if os.Getenv("PGTEST_HELPER") != "1" {
		return
	}
	pgtest.DSN(t)
}

// These need no server, so they run even where the others cannot: they check
// that a missing server says how to get one, and that CI never skips.
func TestDSNWithoutServer(t *testing.T) {
	for _, c := range []struct {
		name, env, ci string
		pass          bool
		want          []string
	}{
		{"unset", "", "", false, []string{"is not set", "bash .ci/run", ".ci/postgres start", "=skip"}},
		{"skip", "skip", "", true, []string{"--- SKIP", ".ci/postgres start"}},
		{"skip in CI", "skip", "true", false, []string{"CI never skips", ".ci/postgres start"}},
		// Port 1 on loopback: nothing listens there, so the connection is refused at once.
		{"unreachable", "postgres://postgres:secret@127.0.0.1:1/postgres?sslmode=disable", "", false,
			[]string{"cannot connect", "127.0.0.1:1", ".ci/postgres start"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDSN$", "-test.v")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, pgtest.EnvVar+"=") && !strings.HasPrefix(kv, "CI=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "PGTEST_HELPER=1", pgtest.EnvVar+"="+c.env, "CI="+c.ci)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.pass {
				t.Errorf("passed = %v, want %v", err == nil, c.pass)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if strings.Contains(string(out), "secret") {
				t.Errorf("output shows the password")
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}
