package repo

import (
	"errors"
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteFailed tells SQLite's storage failures from bugs. A full disk
// (SQLITE_FULL, or EFBIG under a file size limit, which SQLite reports as
// SQLITE_IOERR_WRITE) or a failed read or write of the file rolls the
// transaction back: nothing happened, and the same request succeeds once
// there is room again. That is 503 unavailable, which clients retry, not
// 500 internal, which says the server is broken.
func sqliteFailed(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary code, without the extended bits
		case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: the database file cannot be written (is the disk full?): %v", lk.ErrUnavailable, err)
		}
	}
	return err
}
