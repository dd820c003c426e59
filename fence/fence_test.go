package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/leasekeeper/leasekeeper/fence"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

func write(ctx context.Context, d fence.Dialect, resource, writer string) func(tx *sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, placeholders(d, `INSERT INTO job_rows (resource, writer) VALUES (?, ?)`), resource, writer)
		return err
	}
}

// TestInTx: a job's writes commit with its check, and a stale job's
// transaction is rolled back whole; an equal token passes again; a token
// of another service (a recreated leasekeeper database, whose tokens start
// from 1 again) has rows of its own.
func TestInTx(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, db *sql.DB) {
		ctx := context.Background()
		d := b.dialect
		tok := func(svc string, n int64) fence.Token {
			return fence.Token{Service: svc, Lock: "exports/daily", Token: n}
		}

		steps := []struct {
			tok    fence.Token
			writer string
			stale  int64 // the newer token of the refusal; 0: passes
		}{
			{tok("svc-1", 5), "job-5", 0},
			{tok("svc-1", 5), "job-5-again", 0}, // equal: passes (L6)
			{tok("svc-1", 4), "job-4", 5},       // older: refused, nothing written
			{tok("svc-1", 7), "job-7", 0},
			{tok("svc-1", 6), "job-6", 7},
			{tok("svc-2", 1), "new-service-1", 0}, // the database recreated: its token 1 is not stale
			{tok("svc-2", 1), "new-service-1-again", 0},
		}
		for _, s := range steps {
			err := fence.InTx(ctx, db, d, s.tok, "orders", write(ctx, d, "orders", s.writer))
			var stale *fence.StaleError
			switch {
			case s.stale == 0 && err != nil:
				t.Fatalf("%s: %v", s.writer, err)
			case s.stale != 0 && !errors.As(err, &stale):
				t.Fatalf("%s: got %v, want a *StaleError", s.writer, err)
			case s.stale != 0 && (stale.Newer != s.stale || stale.Token != s.tok.Token || stale.Resource != "orders" ||
				stale.Lock != "exports/daily" || !errors.Is(err, fence.ErrStale)):
				t.Fatalf("%s: %+v", s.writer, *stale)
			}
		}
		got := readWriters(t, b, db, "orders")
		want := []string{"job-5", "job-5-again", "job-7", "new-service-1", "new-service-1-again"}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("rows written by %v, want %v: a refused transaction's writes must not land", got, want)
		}
		// Another resource under the same lock is fenced apart.
		if err := fence.InTx(ctx, db, d, tok("svc-1", 1), "invoices", write(ctx, d, "invoices", "x")); err != nil {
			t.Errorf("another resource: %v", err)
		}
		// fn's error rolls back too, the check's raise included.
		boom := errors.New("boom")
		err := fence.InTx(ctx, db, d, tok("svc-1", 9), "orders", func(tx *sql.Tx) error {
			if err := write(ctx, d, "orders", "job-9")(tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("fn's error: got %v", err)
		}
		if tok := readTokenOf(t, b, db, "svc-1", "exports/daily", "orders"); tok != 7 {
			t.Errorf("after fn failed, the fence holds %d, want 7: the check's raise must roll back with fn", tok)
		}
		// Installing again changes nothing.
		if err := fence.Install(ctx, db, d); err != nil {
			t.Errorf("second Install: %v", err)
		}
		if tok := readTokenOf(t, b, db, "svc-1", "exports/daily", "orders"); tok != 7 {
			t.Errorf("after a second Install, the fence holds %d, want 7", tok)
		}
	})
}

func readTokenOf(t *testing.T, b backend, db *sql.DB, svc, lock, resource string) int64 {
	t.Helper()
	var tok int64
	err := db.QueryRow(placeholders(b.dialect, `SELECT token FROM leasekeeper_fence WHERE service_id = ? AND lock_name = ? AND resource = ?`),
		svc, lock, resource).Scan(&tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCheckRefusesBadTokens: a token without its service, lock or a value
// of 1 or more, or no resource, is refused before any SQL.
func TestCheckRefusesBadTokens(t *testing.T) {
	db := openDB(t, "sqlite", "file:"+sqlitePath(t))
	ctx := context.Background()
	good := fence.Token{Service: "s", Lock: "l", Token: 1}
	for _, c := range []struct {
		tok      fence.Token
		resource string
	}{
		{fence.Token{Lock: "l", Token: 1}, "r"},
		{fence.Token{Service: "s", Token: 1}, "r"},
		{fence.Token{Service: "s", Lock: "l"}, "r"},
		{good, ""},
	} {
		err := fence.InTx(ctx, db, fence.SQLite, c.tok, c.resource, func(*sql.Tx) error { return nil })
		if err == nil {
			t.Errorf("%+v on %q: accepted", c.tok, c.resource)
		}
	}
	if err := fence.Install(ctx, db, "oracle"); err == nil {
		t.Error("an unknown dialect was accepted")
	}
}

// TestRepeatableReadPostgres: at REPEATABLE READ, PostgreSQL answers a
// check that a newer writer committed after the transaction's snapshot
// with a serialization failure, not a refusal: Retryable says so, and InTx
// runs the transaction again, which then meets ErrStale.
func TestRepeatableReadPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := openDB(t, "pgx", dsn)
	ctx := context.Background()
	if err := fence.Install(ctx, db, fence.Postgres); err != nil {
		t.Fatal(err)
	}
	tok := func(n int64) fence.Token { return fence.Token{Service: "s", Lock: "L", Token: n} }
	if err := fence.InTx(ctx, db, fence.Postgres, tok(1), "r", func(*sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	old, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback()
	var n int
	if err := old.QueryRowContext(ctx, `SELECT count(*) FROM leasekeeper_fence`).Scan(&n); err != nil {
		t.Fatal(err) // the snapshot is taken here
	}
	if err := fence.InTx(ctx, db, fence.Postgres, tok(3), "r", func(*sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	err = fence.Check(ctx, old, fence.Postgres, tok(2), "r")
	if errors.Is(err, fence.ErrStale) || !fence.Retryable(err) {
		t.Fatalf("a check at REPEATABLE READ after a newer commit: got %v, want a serialization failure", err)
	}
	old.Rollback()

	// InTx on a database whose transactions are REPEATABLE READ by default:
	// a retry, then the refusal.
	rr := openDB(t, "pgx", dsn+"&default_transaction_isolation=repeatable%20read")
	err = fence.InTx(ctx, rr, fence.Postgres, tok(2), "r", func(*sql.Tx) error { return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("InTx at REPEATABLE READ: got %v, want ErrStale", err)
	}
}

// The drivers' errors, as Retryable sees them.
type sqlStateErr string

func (e sqlStateErr) Error() string    { return "sqlstate " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

type mysqlErr struct {
	Number  uint16
	Message string
}

func (e *mysqlErr) Error() string { return fmt.Sprintf("Error %d: %s", e.Number, e.Message) }

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{sqlStateErr("40001"), true},
		{fmt.Errorf("fence: checking: %w", sqlStateErr("40001")), true},
		{sqlStateErr("23505"), false},
		{&mysqlErr{Number: 1213, Message: "Deadlock found"}, true},
		{fmt.Errorf("wrapped: %w", &mysqlErr{Number: 1213}), true},
		{&mysqlErr{Number: 1205, Message: "Lock wait timeout exceeded"}, false},
		{errors.Join(errors.New("x"), &mysqlErr{Number: 1213}), true},
		{&fence.StaleError{}, false},
		{nil, false},
	} {
		if got := fence.Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(fence.EnvServiceID, "abc")
	t.Setenv(fence.EnvLock, "exports/daily")
	t.Setenv(fence.EnvToken, "42")
	tok, err := fence.FromEnv()
	if err != nil || tok != (fence.Token{Service: "abc", Lock: "exports/daily", Token: 42}) {
		t.Fatalf("FromEnv = %+v, %v", tok, err)
	}
	t.Setenv(fence.EnvToken, "x")
	if _, err := fence.FromEnv(); err == nil {
		t.Error("a token that is not a number was accepted")
	}
	t.Setenv(fence.EnvToken, "42")
	t.Setenv(fence.EnvServiceID, "")
	if _, err := fence.FromEnv(); err == nil {
		t.Error("no service identity was accepted")
	}
}
