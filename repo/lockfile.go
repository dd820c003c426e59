package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// One process per SQLite file. A service keeps state that only its own
// transactions keep true: the blocked acquires it will wake, the timer for
// the next expiry, the clock. A second process writing the same file would
// commit grants and releases the first never hears of, so its waiters
// would sleep through releases (issue 12: a second server took 41 grants in
// 20 s against the first's 27,091). So Open holds an exclusive lock on
// "<file>.lock" beside the database for as long as the DB is open. It is the
// operating system's lock (flock on Unix), held by the open file: it goes
// with the process however that ends, kill -9 included, so it is never
// stale. SQLite's own locks are on the database file and its -shm, which
// this one leaves alone: sqlite3 readers and `leasekeeper backup` go on
// working while a server runs.

// LockSuffix is appended to a SQLite database's path to name its lock file.
const LockSuffix = ".lock"

// InUseError is Open's answer for a SQLite file another open DB holds, in
// this process or another.
type InUseError struct {
	Path     string // the database, as given to Open
	LockFile string
	PID      int // of the holder, as it wrote it in LockFile; 0 if unknown
	// OtherName: the holder opened the same file under another name (a
	// hard link), given as LockFile, or holds the file's own lock.
	OtherName bool
}

func (e *InUseError) Error() string {
	var who string
	switch {
	case e.OtherName && e.PID == os.Getpid():
		who = "already open in this process (pid " + strconv.Itoa(e.PID) + ") under another name of the same file, " + e.LockFile
	case e.OtherName && e.PID == 0:
		who = "the same file is in use by another process, perhaps under another name (a hard link); its pid is not known"
	case e.OtherName:
		who = "the same file is in use by another process, pid " + strconv.Itoa(e.PID) + ", perhaps under another name (a hard link)"
	}
	if who != "" {
		return fmt.Sprintf("open %s: %s; one leasekeeper process at a time (serve, run --db) may use a SQLite file, under whatever name: stop the other first "+
			"(several servers can share a PostgreSQL database instead: docs/deployment.md)", e.Path, who)
	}
	switch e.PID {
	case 0:
		who = "in use by another process, which holds " + e.LockFile + " (its pid is not known)"
	case os.Getpid():
		who = "already open in this process (pid " + strconv.Itoa(e.PID) + "), which holds " + e.LockFile
	default:
		who = "in use by another process, pid " + strconv.Itoa(e.PID) + ", which holds " + e.LockFile
	}
	return fmt.Sprintf("open %s: %s; one leasekeeper process at a time (serve, run --db) may use a SQLite file: stop the other first "+
		"(several servers can share a PostgreSQL database instead: docs/deployment.md)", e.Path, who)
}

// fileLock is a held lock file; release lets it go.
type fileLock struct {
	f    *os.File
	name string
	// guard holds the flock of the database file itself, for the DB's
	// whole life (lockfile_unix.go); key is that file's.
	guard *os.File
	key   fileKey
}

// lockDatabase takes the lock of the SQLite database at path and writes this
// process's id in it. A symbolic link is followed first, so that two names
// of one file share one lock.
func lockDatabase(path string) (*fileLock, error) {
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		return nil, fmt.Errorf("open %s: it is a folder; give the path of a database file (it is created if missing)", path)
	}
	name := target + LockSuffix
	// The holder removes the file as it lets go (release), and someone may
	// remove it between our open and our lock: then the lock we got is on
	// a file nobody else will open, and we try again on the new one.
	for range 10 {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, lockFileError(path, name, err)
		}
		held, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open %s: locking %s: %w", path, name, err)
		}
		if !held {
			pid := readPID(f)
			f.Close()
			return nil, &InUseError{Path: path, LockFile: name, PID: pid}
		}
		if sameFile(f, name) {
			// Written only once the lock is held, so a process that finds
			// the file locked reads the holder's id (or, in the instant
			// between these two calls, nothing).
			if err := f.Truncate(0); err == nil {
				f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			}
			return &fileLock{f: f, name: name}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("open %s: %s keeps being replaced; is something removing it?", path, name)
}

// release removes the lock file and lets the lock go, in that order: a
// process that opened the file before the removal and locks it after finds
// it no longer under its name (lockDatabase) and starts over. A lock file
// left by a killed process is harmless: the lock went with the process.
func (l *fileLock) release() error {
	if l == nil {
		return nil
	}
	l.unguard()
	if sameFile(l.f, l.name) {
		os.Remove(l.name)
	}
	return l.f.Close()
}

// fileKey names a file by what it is, whatever it is called.
type fileKey struct{ dev, ino uint64 }

func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

func sameFile(f *os.File, name string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(name)
	return err == nil && os.SameFile(a, b)
}

// lockFileError says why the lock file beside the database could not be
// opened: being the first thing Open creates, it meets a missing or
// unwritable folder first.
func lockFileError(path, name string, err error) error {
	dir := filepath.Dir(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("open %s: the folder %s does not exist; create it first, or check the path: %w", path, dir, err)
	case errors.Is(err, os.ErrPermission):
		if _, serr := os.Stat(name); serr == nil {
			return fmt.Errorf("open %s: no permission to open %s (was the database created by another user?): %w", path, name, err)
		}
		return fmt.Errorf("open %s: no permission to create files in the folder %s (the server creates %s, and SQLite the -wal and -shm files, beside the database): %w",
			path, dir, filepath.Base(name), err)
	}
	if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
		return fmt.Errorf("open %s: %s is not a folder: %w", path, dir, err)
	}
	return fmt.Errorf("open %s: creating its lock file %s: %w", path, name, err)
}
