package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/fence"
	"github.com/leasekeeper/leasekeeper/internal/mytest"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// jobDB is a job's own database: --db's form of it, and a handle on it for
// the test to look with.
type jobDB struct {
	name string
	dsn  string // as --db takes it
	d    fence.Dialect
	db   *sql.DB
}

// jobDBs are a fresh job database of each dialect, with the table the
// jobs write, orders(writer, n). MySQL's is skipped without a server
// (LEASEKEEPER_TEST_MYSQL), but in CI.
var jobDBs = []struct {
	name string
	open func(t *testing.T) jobDB
}{
	{"sqlite", func(t *testing.T) jobDB {
		path := filepath.Join(t.TempDir(), "jobs.db")
		return openJobDB(t, "sqlite", path, fence.SQLite, "sqlite", "file:"+path)
	}},
	{"postgres", func(t *testing.T) jobDB {
		dsn := pgtest.DSN(t)
		return openJobDB(t, "postgres", dsn, fence.Postgres, "pgx", dsn)
	}},
	{"mysql", func(t *testing.T) jobDB {
		dsn := mytest.DSN(t)
		return openJobDB(t, "mysql", "mysql://"+dsn, fence.MySQL, "mysql", dsn)
	}},
}

func openJobDB(t *testing.T, name, flag string, d fence.Dialect, driver, dsn string) jobDB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE orders (writer VARCHAR(20) NOT NULL, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return jobDB{name: name, dsn: flag, d: d, db: db}
}

// rows is orders' content, "writer:n" sorted.
func (j jobDB) rows(t *testing.T) []string {
	t.Helper()
	rs, err := j.db.Query(`SELECT writer, n FROM orders`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var w string
		var n int
		if err := rs.Scan(&w, &n); err != nil {
			t.Fatal(err)
		}
		out = append(out, w+":"+strconv.Itoa(n))
	}
	slices.Sort(out)
	return out
}

// TestFenceCommands builds the binary once and runs fence install and
// fence sql, then incident INC-5127 through exec and fence sql, on each
// dialect.
func TestFenceCommands(t *testing.T) {
	bin := buildBinary(t)
	for _, jc := range jobDBs {
		t.Run("cli/"+jc.name, func(t *testing.T) {
			t.Parallel()
			testFenceCLI(t, bin, jc.open(t))
		})
		t.Run("inc-5127/"+jc.name, func(t *testing.T) {
			t.Parallel()
			testINC5127Fenced(t, bin, jc.open(t))
		})
	}
}

// testFenceCLI: fence install, then fence sql: committed with the check,
// refused as stale with nothing written (78), statements that would end
// the transaction refused before anything runs (2), a failing statement
// rolling back the others and the check (1), the service identity asked
// of the server when not given.
func testFenceCLI(t *testing.T, bin string, j jobDB) {
	s := startCLIServer(t)
	u := s.url
	install := `{"outcome":"ok","table":"leasekeeper_fence"}`
	expect(t, bin, u, 0, install, "fence", "install", "--db", j.dsn)
	expect(t, bin, u, 0, install, "fence", "install", "--db", j.dsn) // again: nothing changes
	sqlArgs := func(token int, stmts ...string) []string {
		return append([]string{"fence", "sql", "--db", j.dsn, "--lock", "exports/daily", "--token", strconv.Itoa(token),
			"--service-id", "svc", "--resource", "orders", "--"}, stmts...)
	}
	expect(t, bin, u, 0, `{"outcome":"committed","lock":"exports/daily","resource":"orders","token":2,"rows_affected":[1]}`,
		sqlArgs(2, "INSERT INTO orders VALUES ('two', 1)")...)
	r := expect(t, bin, u, exitStale, `{"outcome":"stale","lock":"exports/daily","resource":"orders","token":1,"newer":2}`,
		sqlArgs(1, "INSERT INTO orders VALUES ('one', 1)")...)
	if !strings.Contains(r.stderr, "nothing was written") {
		t.Errorf("stale: stderr %q", r.stderr)
	}
	// Several statements in one argument, and on standard input: an
	// equal token passes again.
	expect(t, bin, u, 0, `{"outcome":"committed","lock":"exports/daily","resource":"orders","token":2,"rows_affected":[1,1]}`,
		sqlArgs(2, "INSERT INTO orders VALUES ('two', 2); INSERT INTO orders VALUES ('two', 3)")...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, stdout, stderr := cliCommand(ctx, bin, u, sqlArgs(2)...)
	cmd.Stdin = strings.NewReader("INSERT INTO orders VALUES ('two', 4);\n-- done\n")
	if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), `"rows_affected":[1]`) {
		t.Errorf("from standard input: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
	want := []string{"two:1", "two:2", "two:3", "two:4"}
	if got := j.rows(t); !slices.Equal(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	// Refused before anything runs.
	for _, stmts := range [][]string{
		{"INSERT INTO orders VALUES ('x', 9); COMMIT"},
		{"BEGIN", "INSERT INTO orders VALUES ('x', 9)"},
		{"SAVEPOINT a; INSERT INTO orders VALUES ('x', 9)"},
	} {
		r := runCLI(t, bin, u, sqlArgs(3, stmts...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "refused") {
			t.Errorf("%q: exit %d, stderr %q; want 2, refused", stmts, r.code, r.stderr)
		}
	}
	if j.d == fence.MySQL {
		r := runCLI(t, bin, u, sqlArgs(3, "INSERT INTO orders VALUES ('x', 9)", "CREATE TABLE x (a INT)")...)
		if r.code != 2 || !strings.Contains(r.stderr, "implicitly") {
			t.Errorf("DDL on MySQL: exit %d, stderr %q; want 2", r.code, r.stderr)
		}
	}
	// A statement that fails rolls back the others, and the check's
	// raise: token 3 has not written.
	r = runCLI(t, bin, u, sqlArgs(3, "INSERT INTO orders VALUES ('x', 9)", "INSERT INTO no_such_table VALUES (1)")...)
	if r.code != 1 || !strings.Contains(r.stderr, "statement 2") {
		t.Errorf("a failing statement: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
	if got := j.rows(t); !slices.Equal(got, want) {
		t.Errorf("after refusals and a failure, rows %v, want %v", got, want)
	}
	expect(t, bin, u, exitStale, `{"outcome":"stale","lock":"exports/daily","resource":"orders","token":1,"newer":2}`,
		sqlArgs(1, "SELECT 1")...)
	// Without --service-id, the server's identity: another row.
	expect(t, bin, u, 0, `{"outcome":"committed","lock":"exports/daily","resource":"orders","token":1,"rows_affected":[1]}`,
		"fence", "sql", "--db", j.dsn, "--lock", "exports/daily", "--token", "1", "--resource", "orders", "--",
		"INSERT INTO orders VALUES ('other-service', 1)")
	var n int
	q := `SELECT count(*) FROM leasekeeper_fence WHERE service_id = ?`
	if j.d == fence.Postgres {
		q = strings.Replace(q, "?", "$1", 1)
	}
	if err := j.db.QueryRow(q, serviceID(t, s)).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows of the server's identity: %d, %v; want 1", n, err)
	}
	// Usage.
	for _, args := range [][]string{
		{"fence", "sql", "--db", j.dsn, "--service-id", "s", "--", "SELECT 1"},                 // no token
		{"fence", "sql", "--db", j.dsn, "--token", "2", "--service-id", "s", "--", "SELECT 1"}, // no lock
		{"fence", "sql", "--db", j.dsn, "--lock", "L", "--token", "2", "--service-id", "s", "--", "-- nothing"},
	} {
		if r := runCLI(t, bin, u, args...); r.code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, r.code, r.stderr)
		}
	}
}

// testINC5127Fenced is incident INC-5127 with the check in the job's own
// database, end to end, on each dialect. Job A runs under exec with a
// 2-second lease; before its check, A and its exec are stopped (SIGSTOP:
// nothing renews) past the lease; job B takes the lock and writes its
// rows through fence sql; A is continued. A's write is refused (fence
// sql's 78), B's rows are intact, and A's exec exits with the lease-lost
// status. A ignores SIGTERM, as a job that does not stop promptly would:
// so it reaches its check whatever exec does first. Its shell ignores it
// (trap), and its fence sql runs in a session of its own (setsid), out of
// the process group exec signals: a Go program catches SIGTERM even when
// started with it ignored, and one run of MySQL's variant was killed by
// exec's SIGTERM before its check.
func testINC5127Fenced(t *testing.T, bin string, j jobDB) {
	s := startCLIServer(t)
	expect(t, bin, s.url, 0, `{"outcome":"ok","table":"leasekeeper_fence"}`, "fence", "install", "--db", j.dsn)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	jobA := `trap '' TERM
echo $$ > "$DIR/a.pid"
while [ ! -e "$DIR/go" ]; do sleep 0.05; done
setsid "$LK" fence sql --db "$DB" -- "INSERT INTO orders VALUES ('A', 1)" > "$DIR/a.out" 2> "$DIR/a.err"
echo $? > "$DIR/a.status"`
	a, _, aStderr := cliCommand(ctx, bin, s.url, "exec", "exports/daily", "--client", "job-a", "--ttl", "2", "--",
		"sh", "-c", jobA)
	a.Env = append(a.Env, "DIR="+dir, "DB="+j.dsn, "LK="+bin)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	var pgid int
	testutil.Eventually(t, 10*time.Second, "job A running", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "a.pid"))
		pgid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pgid > 0
	})
	// Stop A's command (its process group) and its exec: nothing renews.
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(-pgid, syscall.SIGCONT)
			a.Process.Signal(syscall.SIGCONT)
		}
	}()
	// Let A go to its check as soon as it is continued.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// B waits for A's lease to lapse, takes the lock (token 2) and
	// writes through fence.
	b, bOut, bErr := cliCommand(ctx, bin, s.url, "exec", "exports/daily", "--client", "job-b", "--ttl", "30", "--wait", "30", "--",
		bin, "fence", "sql", "--db", j.dsn, "--", "INSERT INTO orders VALUES ('B', 1); INSERT INTO orders VALUES ('B', 2)")
	if err := b.Run(); err != nil || !strings.Contains(bOut.String(), `"outcome":"committed","lock":"exports/daily","resource":"exports/daily","token":2`) {
		t.Fatalf("job B: %v, stdout %q, stderr %q", err, bOut, bErr)
	}

	// A is continued.
	syscall.Kill(-pgid, syscall.SIGCONT)
	a.Process.Signal(syscall.SIGCONT)
	stopped = false
	code := exitCode(a.Wait())
	out, _ := os.ReadFile(filepath.Join(dir, "a.out"))
	errOut, _ := os.ReadFile(filepath.Join(dir, "a.err"))
	status, _ := os.ReadFile(filepath.Join(dir, "a.status"))
	t.Logf("A's exec: exit %d\n%s", code, aStderr)
	t.Logf("A's fence sql: exit %s%s%s", status, out, errOut)
	var res fenceSQLResult
	json.Unmarshal(out, &res)
	if strings.TrimSpace(string(status)) != strconv.Itoa(exitStale) || res.Outcome != "stale" || res.Token != 1 || res.Newer != 2 {
		t.Errorf("A's fence sql: exit %s, printed %q: want 78, stale, token 1 refused by 2", status, out)
	}
	// The refusal reached the server (POST /v1/stale, as job-a, the
	// holder of token 1): no warning that the report failed.
	if strings.Contains(string(errOut), "reporting the refusal") {
		t.Errorf("A's report of the refusal failed: %s", errOut)
	}
	if code != exitLost {
		t.Errorf("A's exec: exit %d, want %d (lease lost)", code, exitLost)
	}
	if got, want := j.rows(t), []string{"B:1", "B:2"}; !slices.Equal(got, want) {
		t.Errorf("orders: %v, want B's rows only, intact: %v", got, want)
	}
}
