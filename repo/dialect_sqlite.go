package repo

import (
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	lk "github.com/leasekeeper/leasekeeper"
)

// sqliteDialect is SQLite: the embedded database, one process on one file
// (or in memory).
type sqliteDialect struct{}

func (sqliteDialect) String() string { return "sqlite" }

// bind keeps the parameters as written: the registry's syntax is SQLite's.
func (sqliteDialect) bind(text string, _ []param) string { return text }

// byteCollation: BINARY compares with memcmp().
func (sqliteDialect) byteCollation() string { return `COLLATE BINARY` }

// begin: IMMEDIATE takes SQLite's write lock at once, so a transaction never
// fails half-way for want of it.
func (sqliteDialect) begin() string { return `BEGIN IMMEDIATE` }

// serviceCounters: the registration counter is the larger of the stored
// value and the youngest registered age. The stored one is written only
// when an abort deletes a client; otherwise the youngest age is the
// counter, and registering writes no counter (docs/performance.md).
func (sqliteDialect) serviceCounters() string {
	return `SELECT clock, max(last_client_age, (SELECT coalesce(max(age), 0) FROM clients)), event_id, token_floor
		FROM service WHERE id = 1`
}

// lockGrant: SQLite has no data-modifying WITH, so a grant is two
// statements (LockGrant).
func (sqliteDialect) lockGrant(bool) string { return "" }

// leaseRenew, leaseEnd: neither, for the same reason (LeaseRenew, LeaseEnd).
func (sqliteDialect) leaseRenew() string { return "" }
func (sqliteDialect) leaseEnd() string   { return "" }

// lockServiceRow, clock, notify, currentSchema, listen: a SQLite database is
// never shared; BEGIN IMMEDIATE is its lock.
func (sqliteDialect) lockServiceRow() string { return "" }
func (sqliteDialect) clock() string          { return "" }
func (sqliteDialect) notify() string         { return "" }
func (sqliteDialect) currentSchema() string  { return "" }
func (sqliteDialect) listen(string) string   { return "" }

// backupInto: VACUUM INTO reads one snapshot of a WAL database.
func (sqliteDialect) backupVersion() string {
	return `SELECT max(version_id) FROM goose_db_version`
}
func (sqliteDialect) backupInto() string { return `VACUUM INTO ?` }

// readBegin: a plain BEGIN takes no lock until the first SELECT, and then
// only a WAL read mark; the statements of a read see one snapshot.
func (sqliteDialect) readBegin() string { return `BEGIN` }

func (sqliteDialect) notifyEventID() string { return "" }

func (sqliteDialect) indexedBy(index string) string { return `INDEXED BY ` + index }

func (sqliteDialect) peers() bool                 { return false }
func (sqliteDialect) pipelines() bool             { return false }
func (sqliteDialect) escapesText() bool           { return false }
func (sqliteDialect) readDeadline() time.Duration { return 0 }

// failed tells SQLite's storage failures from bugs. A full disk
// (SQLITE_FULL, or EFBIG under a file size limit, which SQLite reports as
// SQLITE_IOERR_WRITE) or a failed read or write of the file rolls the
// transaction back: nothing happened, and the same request succeeds once
// there is room again. That is 503 unavailable, which clients retry, not
// 500 internal, which says the server is broken. A SQLite connection is a
// file handle: it is never lost.
func (sqliteDialect) failed(err error) (mapped error, suspect, replace bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code, without the extended bits
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w (is the disk full?): %v", lk.ErrUnavailable, ErrDiskFull, err), false, false
		}
	}
	return err, false, false
}

// pagesRead sums the connection's page-cache hits and misses.
func (sqliteDialect) pagesRead(conn *sqlx.Conn) (int64, error) {
	var pages int64
	err := conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return errors.New("repo: the SQLite driver does not report page counts")
		}
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			n, _, err := st.Status(op, false)
			if err != nil {
				return err
			}
			pages += int64(n)
		}
		return nil
	})
	return pages, err
}

// checkpoint copies the WAL's committed pages into the database file, not
// waiting for readers (PASSIVE): a write that reaches the file itself.
func (sqliteDialect) checkpoint() string { return `PRAGMA wal_checkpoint(PASSIVE)` }
