package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Dialect is the kind of database the job writes to.
type Dialect string

// The dialects fence knows.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
	MySQL    Dialect = "mysql" // MySQL and MariaDB, InnoDB tables
)

// Table is the name of the table Install creates and Check writes.
const Table = "leasekeeper_fence"

// DefaultBusyTimeout is the busy timeout Check sets on a SQLite connection
// that has none, so that a second writer waits for the first rather than
// failing at once with SQLITE_BUSY.
const DefaultBusyTimeout = 5 * time.Second

// Token is a job's right to write: a fencing token and where it comes from.
type Token struct {
	// Service is the identity of the leasekeeper service that granted the
	// token: GET /v1/health's service_id, LEASEKEEPER_SERVICE_ID under exec.
	Service string
	Lock    string // the lock the token was granted on
	Token   int64  // the fencing token, 1 or more
}

func (t Token) validate(resource string) error {
	switch {
	case t.Service == "":
		return errors.New("fence: the token has no service identity (GET /v1/health's service_id)")
	case t.Lock == "":
		return errors.New("fence: the token has no lock")
	case t.Token < 1:
		return fmt.Errorf("fence: token %d: a fencing token is 1 or more", t.Token)
	case resource == "":
		return errors.New("fence: no resource: name what the transaction writes (the lock's name will do)")
	}
	return nil
}

// The environment of a command run by `leasekeeper exec` (docs/cli.md).
const (
	EnvServiceID = "LEASEKEEPER_SERVICE_ID"
	EnvLock      = "LEASEKEEPER_LOCK"
	EnvToken     = "LEASEKEEPER_TOKEN"
)

// FromEnv returns the token of the lock `leasekeeper exec` holds for the
// current process, from LEASEKEEPER_SERVICE_ID, LEASEKEEPER_LOCK and
// LEASEKEEPER_TOKEN. With several locks (exec A B -- CMD), those single-lock
// variables are absent: pick the lock from LEASEKEEPER_LOCKS and
// LEASEKEEPER_TOKENS instead.
func FromEnv() (Token, error) {
	t := Token{Service: os.Getenv(EnvServiceID), Lock: os.Getenv(EnvLock)}
	raw := os.Getenv(EnvToken)
	if t.Lock == "" || raw == "" {
		return t, fmt.Errorf("fence: %s and %s are not set: not run by leasekeeper exec with one lock", EnvLock, EnvToken)
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return t, fmt.Errorf("fence: %s=%q is not a token", EnvToken, raw)
	}
	t.Token = n
	if t.Service == "" {
		return t, fmt.Errorf("fence: %s is not set: the server that granted the lock does not tell its identity", EnvServiceID)
	}
	return t, nil
}

// ErrStale is what a *StaleError matches: a newer token has already
// written to the resource.
var ErrStale = errors.New("stale token")

// StaleError is Check's refusal: Token is the job's, Newer the token that
// has already written to Resource under Lock.
type StaleError struct {
	Service  string
	Lock     string
	Resource string
	Token    int64
	Newer    int64
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token: %q was written with token %d of lock %q, newer than this job's %d",
		e.Resource, e.Newer, e.Lock, e.Token)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Tx is what Check runs its statements on: *sql.Tx, or any type with the
// same two methods over a transaction (sqlx's Tx, a wrapper).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var _ Tx = (*sql.Tx)(nil)

// Install creates the fence table (InstallSQL) if it does not exist.
func Install(ctx context.Context, db *sql.DB, d Dialect) error {
	q, err := installSQL(d)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("fence: installing %s: %w", Table, err)
	}
	return nil
}

// Check raises resource's token to t's inside tx, the transaction of the
// job's writes, and returns a *StaleError when a newer token has already
// written to it. An equal token passes. The check holds until tx ends: a
// newer writer's check waits for tx's commit or rollback, and then sees
// this token.
//
// On a *StaleError, or any error, the caller must roll tx back, so that
// none of its writes land. Some errors say the transaction lost a race and
// is already void: a serialization failure (PostgreSQL at REPEATABLE READ
// or SERIALIZABLE, SQLSTATE 40001) or a deadlock (MySQL error 1213).
// Retryable reports them; retry the whole transaction, as InTx does.
func Check(ctx context.Context, tx Tx, d Dialect, t Token, resource string) error {
	if err := t.validate(resource); err != nil {
		return err
	}
	dd, ok := dialects[d]
	if !ok {
		return unknownDialect(d)
	}
	if dd.prepare != nil {
		if err := dd.prepare(ctx, tx); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
	}
	cur, err := dd.check(ctx, tx, t, resource)
	if err != nil {
		return fmt.Errorf("fence: checking token %d for %q: %w", t.Token, resource, err)
	}
	if cur > t.Token {
		return &StaleError{Service: t.Service, Lock: t.Lock, Resource: resource, Token: t.Token, Newer: cur}
	}
	return nil
}

// Retryable reports whether err says that the transaction lost a race with
// another and was rolled back or must be: a serialization failure
// (SQLSTATE 40001: PostgreSQL at REPEATABLE READ or SERIALIZABLE, MySQL's
// deadlocks) or a MySQL/MariaDB deadlock (error 1213). Running the whole
// transaction again then either passes or meets ErrStale. It reads the
// drivers' error types without importing them: a SQLState() method (pgx,
// lib/pq) or a Number field (go-sql-driver/mysql).
func Retryable(err error) bool {
	for e := range chain(err) {
		if s, ok := e.(interface{ SQLState() string }); ok && s.SQLState() == "40001" {
			return true
		}
		if n, ok := mysqlNumber(e); ok && n == 1213 {
			return true
		}
	}
	return false
}

// Beginner starts transactions: *sql.DB, or a *sql.Conn whose session
// settings (a lock timeout, say) the transactions should have.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ Beginner = (*sql.DB)(nil)
	_ Beginner = (*sql.Conn)(nil)
)

// MaxAttempts bounds how often InTx runs a transaction that lost a race
// (Retryable) in its check.
const MaxAttempts = 5

// InTx runs fn in a transaction of db (at its default isolation level) whose first statement is Check, and
// commits only if both Check and fn succeeded: a stale job's transaction is
// rolled back whole, and InTx returns the *StaleError. It rolls back when fn
// returns an error or panics (and re-panics). When the check loses a race
// (Retryable), nothing of fn has run yet: InTx runs the transaction again,
// up to MaxAttempts times. A transaction that fails in fn or at its commit
// is never run again.
func InTx(ctx context.Context, db Beginner, d Dialect, t Token, resource string, fn func(tx *sql.Tx) error) error {
	if err := t.validate(resource); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := inTxOnce(ctx, db, d, t, resource, fn)
		var c checkError
		if !errors.As(err, &c) {
			return err
		}
		if attempt >= MaxAttempts || !Retryable(c.err) || ctx.Err() != nil {
			return c.err
		}
		// Both losers of a deadlock are told; back off a little so that
		// they do not meet again at once.
		time.Sleep(time.Duration(attempt) * 10 * time.Millisecond)
	}
}

// checkError marks an error of InTx's check, before fn ran.
type checkError struct{ err error }

func (c checkError) Error() string { return c.err.Error() }

func inTxOnce(ctx context.Context, db Beginner, d Dialect, t Token, resource string, fn func(tx *sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	if err := Check(ctx, tx, d, t, resource); err != nil {
		return checkError{err}
	}
	if err := fn(tx); err != nil {
		return err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit: %w", err)
	}
	return nil
}

// InstallSQL is the SQL that Install runs for d, for those who install the
// table with their own migration tool (it is also in docs/fencing.md).
func InstallSQL(d Dialect) string {
	q, _ := installSQL(d)
	return q
}

// CheckSQL is the SQL of Check for d, in the order Check runs it, with its
// parameters numbered as the dialect writes them: the service identity, the
// lock, the resource and the token. For users of other languages
// (docs/fencing.md).
func CheckSQL(d Dialect) []string {
	if dd, ok := dialects[d]; ok {
		return dd.sql
	}
	return nil
}

func unknownDialect(d Dialect) error {
	return fmt.Errorf("fence: unknown dialect %q (postgres, sqlite or mysql)", d)
}
