package fence_test

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "modernc.org/sqlite"

	"github.com/leasekeeper/leasekeeper/fence"
	"github.com/leasekeeper/leasekeeper/internal/mytest"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// backend is a real database of one dialect, opened as a user would open it.
type backend struct {
	name    string
	dialect fence.Dialect
	open    func(t *testing.T) *sql.DB
}

// backends are every dialect, each at its default isolation level. SQLite
// twice: with BEGIN IMMEDIATE (_txlock=immediate, and a busy timeout), and
// as database/sql opens it by default (a deferred BEGIN and no busy
// timeout), where the check must be the transaction's first statement and
// sets the busy timeout itself.
var backends = []backend{
	{"sqlite-immediate", fence.SQLite, func(t *testing.T) *sql.DB {
		return openDB(t, "sqlite", "file:"+sqlitePath(t)+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	}},
	{"sqlite-deferred", fence.SQLite, func(t *testing.T) *sql.DB {
		return openDB(t, "sqlite", "file:"+sqlitePath(t))
	}},
	{"postgres", fence.Postgres, func(t *testing.T) *sql.DB { return openDB(t, "pgx", pgtest.DSN(t)) }},
	{"mysql", fence.MySQL, func(t *testing.T) *sql.DB { return openDB(t, "mysql", mytest.DSN(t)) }},
}

func sqlitePath(t *testing.T) string {
	return (&url.URL{Path: filepath.Join(t.TempDir(), "job.db")}).EscapedPath()
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("%s: %v", driver, err)
	}
	return db
}

// eachBackend runs f on a fresh database of every dialect, with the fence
// table installed and a table of the job's own, rows(resource, writer).
func eachBackend(t *testing.T, f func(t *testing.T, b backend, db *sql.DB)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t)
			ctx := context.Background()
			if err := fence.Install(ctx, db, b.dialect); err != nil {
				t.Fatal(err)
			}
			rows := `CREATE TABLE job_rows (resource VARCHAR(100) NOT NULL, writer VARCHAR(100) NOT NULL)`
			if b.dialect == fence.MySQL {
				rows += ` ENGINE = InnoDB`
			}
			if _, err := db.ExecContext(ctx, rows); err != nil {
				t.Fatal(err)
			}
			f(t, b, db)
		})
	}
}

// placeholders rewrites ? to $N for PostgreSQL.
func placeholders(d fence.Dialect, q string) string {
	if d != fence.Postgres {
		return q
	}
	out := make([]byte, 0, len(q)+8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			out = append(out, '$')
			out = strconv.AppendInt(out, int64(n), 10)
			continue
		}
		out = append(out, q[i])
	}
	return string(out)
}
