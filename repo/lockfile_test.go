//go:build unix

package repo_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/leasekeeper/leasekeeper/repo"
)

func openDB(t *testing.T, path string) (*repo.DB, error) {
	t.Helper()
	d, err := repo.Open(context.Background(), path, repo.Options{})
	if err == nil {
		t.Cleanup(func() { d.Close() })
	}
	return d, err
}

// TestOneOpenPerFile: a SQLite file is opened by one DB at a time, under any
// of its names (a symbolic or a hard link); the refusal names the file and the holder's pid, and the
// file opens again once the holder closes it. Private in-memory databases
// are not files and are never refused.
func TestOneOpenPerFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "one.db")
	first, err := openDB(t, path)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	// A hard link is the same file under a name of its own, with a lock
	// file of its own (issue 20).
	hard := filepath.Join(t.TempDir(), "hard.db")
	if err := os.Link(path, hard); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, link, hard} {
		_, err := openDB(t, name)
		var inUse *repo.InUseError
		if !errors.As(err, &inUse) {
			t.Fatalf("a second Open of %s = %v, want an *InUseError", name, err)
		}
		pid := strconv.Itoa(os.Getpid())
		if inUse.PID != os.Getpid() || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "pid "+pid) {
			t.Errorf("a second Open of %s: %v (pid %d), want the path and pid %s", name, err, inUse.PID, pid)
		}
	}
	if b, err := os.ReadFile(path + repo.LockSuffix); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("the lock file holds %q, %v; want this process's pid", b, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + repo.LockSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the lock file after Close: %v, want it removed", err)
	}
	if _, err := openDB(t, link); err != nil {
		t.Errorf("Open after the first DB closed: %v", err)
	}
	for range 2 {
		if _, err := openDB(t, repo.MemoryPath); err != nil {
			t.Errorf("Open(%s): %v", repo.MemoryPath, err)
		}
	}
}

// TestOpenStaleLockFile: a lock file left by a process that died (kill -9
// leaves it) holds no lock, whatever pid it names.
func TestOpenStaleLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale.db")
	if err := os.WriteFile(path+repo.LockSuffix, []byte("999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openDB(t, path); err != nil {
		t.Fatalf("Open beside a stale lock file: %v", err)
	}
}

// TestDatabaseFilesPrivate: the database, its -wal and -shm are created
// readable by their owner only (0600, as the audit log), whatever the umask
// lets through, and so is a backup: they hold the fenced store's values.
func TestDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	path := filepath.Join(dir, "private.db")
	d, err := openDB(t, path)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.LockCreate(tx, "L", 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := repo.Backup(context.Background(), path, copyPath); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + "-wal", path + "-shm", path + repo.LockSuffix, copyPath} {
		st, err := os.Stat(name)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(name), err)
			continue
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(name), m)
		}
	}
}

// TestOpenErrorsNameThePathAndCause: what SQLite says ("unable to open
// database file (14)", "file is not a database (26)") names neither the
// file nor why; Open's errors name both.
func TestOpenErrorsNameThePathAndCause(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(text, []byte(strings.Repeat(`{"msg":"grant","lock":"L"}`+"\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "folder.db")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, cause string
	}{
		{"missing folder", filepath.Join(dir, "missing", "x.db"), "the folder " + filepath.Join(dir, "missing") + " does not exist"},
		{"parent is a file", filepath.Join(text, "x.db"), text + " is not a folder"},
		{"not a database", text, "not a SQLite database"},
		{"a folder", folder, "is a folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := openDB(t, c.path)
			if err == nil {
				t.Fatalf("Open(%s) succeeded", c.path)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "open "+c.path+": ") || !strings.Contains(msg, c.cause) {
				t.Errorf("Open(%s) = %q, want it to name the path and say %q", c.path, msg, c.cause)
			}
		})
	}
	if _, err := os.Stat(folder + repo.LockSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening a folder left %s behind: %v", filepath.Base(folder)+repo.LockSuffix, err)
	}
}

// TestOpenErrorsPermission: a database file its user may not write, or a
// folder where it may not create one, is named with the cause (SQLite
// itself would open the file read-only and fail at the first write). Root may write anything, so this runs as another user only.
func TestOpenErrorsPermission(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping: root may open any file, so there is no permission error to see")
	}
	path := filepath.Join(t.TempDir(), "ro.db")
	d, err := openDB(t, path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	_, err = openDB(t, path)
	if err == nil || !strings.HasPrefix(err.Error(), "open "+path+": ") || !strings.Contains(err.Error(), "no permission to read and write "+path) {
		t.Errorf("Open of a read-only database = %v, want its path and \"no permission\"", err)
	}
	locked := filepath.Join(t.TempDir(), "locked")
	if err := os.Mkdir(locked, 0o500); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(locked, "new.db")
	_, err = openDB(t, path)
	if err == nil || !strings.HasPrefix(err.Error(), "open "+path+": ") || !strings.Contains(err.Error(), "no permission to create files in the folder "+locked) {
		t.Errorf("Open in a read-only folder = %v, want its path and \"no permission\"", err)
	}
}
