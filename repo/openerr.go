package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// prepareFile creates the database file, when it does not exist yet,
// readable and writable by its owner only: it holds the fenced store's
// values, as the audit log holds their traces (also 0600). SQLite gives
// the -wal and -shm files it creates the database file's permissions, so
// they follow. An existing file keeps the permissions its operator gave it.
//
// It then checks that the files can be written: SQLite opens a file it may
// only read without a word, and a server would start only to fail at its
// first write.
func prepareFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		err = f.Close()
	} else if errors.Is(err, os.ErrExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("open %s: creating it: %w", path, err)
	}
	if cause := accessProblem(path); cause != "" {
		return fmt.Errorf("open %s: %s", path, cause)
	}
	return nil
}

// openError names the file and the likely cause of SQLite's refusal to open
// it: SQLite's own messages ("unable to open database file (14)", "file is
// not a database (26)") name neither.
func openError(path string, err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("open %s: %w", path, err)
	}
	var cause string
	switch se.Code() & 0xff { // the primary code, without the extended bits
	case sqlite3.SQLITE_NOTADB:
		cause = "it is not a SQLite database, so not a leasekeeper one; is the path right? " +
			"(a leasekeeper database is a SQLite file that serve or run --db created)"
	case sqlite3.SQLITE_CORRUPT:
		cause = "the database is damaged; restore a backup (docs/deployment.md)"
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		cause = accessProblem(path)
		if cause == "" {
			cause = "SQLite could not open or write it, or its -wal or -shm file beside it"
		}
	case sqlite3.SQLITE_FULL:
		cause = "the disk is full"
	case sqlite3.SQLITE_IOERR:
		cause = "the disk or filesystem failed to read or write it"
	default:
		return fmt.Errorf("open %s: %w", path, err)
	}
	return fmt.Errorf("open %s: %s: %w", path, cause, err)
}

// accessProblem looks at the database's folder and files for what keeps
// SQLite from opening them for writing, "" if it finds nothing.
func accessProblem(path string) string {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "the folder " + dir + " does not exist"
		}
		return "the folder " + dir + " cannot be reached: " + err.Error()
	} else if !st.IsDir() {
		return dir + " is not a folder"
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return "it is a folder, not a database file"
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		switch {
		case err == nil:
			f.Close()
		case errors.Is(err, os.ErrNotExist):
		case errors.Is(err, os.ErrPermission):
			return "no permission to read and write " + name + " (does it belong to another user?)"
		default:
			return "cannot open " + name + " for writing: " + err.Error()
		}
	}
	return ""
}
