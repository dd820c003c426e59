package fence

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"iter"
	"reflect"
)

//go:embed sql/*.sql
var installFiles embed.FS

func installSQL(d Dialect) (string, error) {
	if _, ok := dialects[d]; !ok {
		return "", unknownDialect(d)
	}
	b, err := installFiles.ReadFile("sql/" + string(d) + ".sql")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// dialect is how Check runs on one kind of database.
type dialect struct {
	sql []string // the statements, for CheckSQL and docs/fencing.md
	// prepare readies tx's connection for the check; nil for nothing.
	prepare func(ctx context.Context, tx Tx) error
	// check raises resource's token to t's unless a newer one wrote, and
	// returns the resource's token after it: t.Token when it passed.
	check func(ctx context.Context, tx Tx, t Token, resource string) (int64, error)
}

var dialects = map[Dialect]dialect{
	Postgres: upsertReturning(pgUpsert, pgRead),
	SQLite:   withPrepare(upsertReturning(liteUpsert, liteRead), sqliteBusyTimeout),
	MySQL:    {sql: []string{myUpsert, myRead}, check: mysqlCheck},
}

// PostgreSQL and SQLite: one statement that inserts the resource's row or
// raises its token, unless a newer token wrote (the WHERE), and returns the
// row only when it passed. On PostgreSQL a concurrent writer's uncommitted
// row makes the statement wait for its transaction; once it ends, ON
// CONFLICT locks the newest committed row and evaluates the WHERE on it (at
// READ COMMITTED; at REPEATABLE READ a row newer than the snapshot is a
// serialization failure). A SELECT ... FOR UPDATE first would lock nothing
// when the row does not exist yet, and two jobs would both pass. On SQLite
// the writer holds the database's write lock until it commits. The row
// stays locked (or the database write-locked) until the transaction ends,
// so the second statement, run only on a refusal, reads the newer token
// that refused it.
const (
	pgUpsert = `INSERT INTO leasekeeper_fence (service_id, lock_name, resource, token) VALUES ($1, $2, $3, $4)
ON CONFLICT (service_id, lock_name, resource) DO UPDATE SET token = excluded.token
WHERE leasekeeper_fence.token <= excluded.token
RETURNING token`
	pgRead = `SELECT token FROM leasekeeper_fence WHERE service_id = $1 AND lock_name = $2 AND resource = $3`

	liteUpsert = `INSERT INTO leasekeeper_fence (service_id, lock_name, resource, token) VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (service_id, lock_name, resource) DO UPDATE SET token = excluded.token
WHERE leasekeeper_fence.token <= excluded.token
RETURNING token`
	liteRead = `SELECT token FROM leasekeeper_fence WHERE service_id = ?1 AND lock_name = ?2 AND resource = ?3`
)

func upsertReturning(upsert, read string) dialect {
	return dialect{
		sql: []string{upsert, read},
		check: func(ctx context.Context, tx Tx, t Token, resource string) (int64, error) {
			var got int64
			err := tx.QueryRowContext(ctx, upsert, t.Service, t.Lock, resource, t.Token).Scan(&got)
			if err == nil {
				return got, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return 0, err
			}
			// Refused: the row is locked, its token newer than t's.
			if err := tx.QueryRowContext(ctx, read, t.Service, t.Lock, resource).Scan(&got); err != nil {
				return 0, fmt.Errorf("reading the newer token: %w", err)
			}
			if got <= t.Token {
				return 0, fmt.Errorf("the check refused token %d, yet the row holds %d", t.Token, got)
			}
			return got, nil
		},
	}
}

func withPrepare(d dialect, prepare func(context.Context, Tx) error) dialect {
	d.prepare = prepare
	return d
}

// sqliteBusyTimeout gives the connection a busy timeout if it has none: a
// writer that finds the database write-locked waits up to it, where without
// one it fails at once with SQLITE_BUSY. The waiting happens only while the
// transaction has read nothing yet (BEGIN IMMEDIATE, or the check first):
// a transaction whose snapshot is older than the lock holder's commit can
// only fail.
func sqliteBusyTimeout(ctx context.Context, tx Tx) error {
	var ms int64
	if err := tx.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&ms); err != nil {
		return fmt.Errorf("reading SQLite's busy_timeout: %w", err)
	}
	if ms > 0 {
		return nil
	}
	// A PRAGMA that sets returns the new value as a row.
	if err := tx.QueryRowContext(ctx, fmt.Sprintf(`PRAGMA busy_timeout = %d`, DefaultBusyTimeout.Milliseconds())).Scan(&ms); err != nil {
		return fmt.Errorf("setting SQLite's busy_timeout: %w", err)
	}
	return nil
}

// MySQL/MariaDB: the upsert keeps the larger token and leaves the row
// X-locked by this transaction; the locking read then reads the row's
// newest committed version. A plain SELECT would read the transaction's
// snapshot (REPEATABLE READ), which may predate a newer writer and pass
// wrongly. The affected-rows count is not used: it counts only changed
// rows unless the connection sets clientFoundRows, so an equal token
// would look like a refusal. On a key that does not exist yet, two upserts
// can deadlock (error 1213), which rolls the transaction back: Retryable.
const (
	myUpsert = `INSERT INTO leasekeeper_fence (service_id, lock_name, resource, token) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))`
	myRead = `SELECT token FROM leasekeeper_fence WHERE service_id = ? AND lock_name = ? AND resource = ? FOR UPDATE`
)

func mysqlCheck(ctx context.Context, tx Tx, t Token, resource string) (int64, error) {
	if _, err := tx.ExecContext(ctx, myUpsert, t.Service, t.Lock, resource, t.Token); err != nil {
		return 0, err
	}
	var got int64
	if err := tx.QueryRowContext(ctx, myRead, t.Service, t.Lock, resource).Scan(&got); err != nil {
		return 0, fmt.Errorf("reading the token back: %w", err)
	}
	return got, nil
}

// chain yields err and every error it wraps, depth first.
func chain(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			case interface{ Unwrap() []error }:
				for _, x := range u.Unwrap() {
					if !walk(x) {
						return false
					}
				}
			}
			return true
		}
		walk(err)
	}
}

// mysqlNumber is the server's error number of go-sql-driver/mysql's
// *MySQLError (its Number field), read without importing the driver.
func mysqlNumber(err error) (uint16, bool) {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, false
	}
	f := v.FieldByName("Number")
	if !f.IsValid() || f.Kind() != reflect.Uint16 {
		return 0, false
	}
	return uint16(f.Uint()), true
}
