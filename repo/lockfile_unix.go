//go:build unix

package repo

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting. A flock belongs to the
// open file, not to the process: a second Open in the same process is
// refused too, and closing f lets it go.
func tryLock(f *os.File) (held bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return lerr == nil, lerr
}

// The lock file above is keyed on a name, and a hard link gives the same
// file another one (issue 20: `ln h1.db h2.db`, then a server on each, and
// both granted L with token 1). So Open also takes a flock on the database
// file itself, keyed by what it is (device and inode), not what it is called.
// A flock is not one of SQLite's POSIX (fcntl) locks and does not meet them:
// sqlite3 readers and backups go on working. But closing any descriptor of
// the file drops this process's POSIX locks on it, SQLite's included: so the
// guard's descriptor stays open until the DB is closed, and no descriptor of
// a file this process has open is ever opened and closed again here. The
// files this process holds are therefore looked up by device and inode
// first (guarded), before anything opens the file.
var guarded = struct {
	sync.Mutex
	files map[fileKey]string // the path each was opened by
}{files: map[fileKey]string{}}

func keyOf(st os.FileInfo) (fileKey, bool) {
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{uint64(s.Dev), uint64(s.Ino)}, true
}

// checkGuarded refuses a file this process already has open under any name,
// without opening it: it must run before anything opens the file.
func checkGuarded(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // not there yet: nothing holds it
	}
	k, ok := keyOf(st)
	if !ok {
		return nil
	}
	guarded.Lock()
	other, held := guarded.files[k]
	guarded.Unlock()
	if held {
		return &InUseError{Path: path, LockFile: other, PID: os.Getpid(), OtherName: true}
	}
	return nil
}

// guardFile takes the flock of the database file at path (it exists: Open
// created it) on a descriptor of its own, held until release.
func (l *fileLock) guardFile(path string) error {
	guarded.Lock()
	defer guarded.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	st, err := f.Stat()
	k, ok := keyOf(st)
	if err != nil || !ok {
		f.Close()
		return fmt.Errorf("open %s: cannot tell which file it is: %v", path, err)
	}
	if other, held := guarded.files[k]; held {
		// Renamed in between: keep f open rather than drop the holder's
		// locks by closing it.
		return &InUseError{Path: path, LockFile: other, PID: os.Getpid(), OtherName: true}
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("open %s: locking it: %w", path, err)
	}
	if !held {
		f.Close() // this process holds no lock on it: nothing to drop
		return &InUseError{Path: path, LockFile: path, PID: flockHolder(k), OtherName: true}
	}
	guarded.files[k] = path
	l.guard, l.key = f, k
	return nil
}

// unguard lets the database file's flock go, once SQLite has closed it.
func (l *fileLock) unguard() {
	if l.guard == nil {
		return
	}
	guarded.Lock()
	delete(guarded.files, l.key)
	guarded.Unlock()
	l.guard.Close()
	l.guard = nil
}

// flockHolder finds the pid that holds a flock on the file k in
// /proc/locks (Linux); 0 where that cannot be told.
func flockHolder(k fileKey) int {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	major := (k.dev>>8)&0xfff | (k.dev>>32)&0xfffff000
	minor := k.dev&0xff | (k.dev>>12)&0xffffff00
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, k.ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF"
		fs := strings.Fields(sc.Text())
		if len(fs) >= 6 && fs[1] == "FLOCK" && fs[5] == want {
			if pid, err := strconv.Atoi(fs[4]); err == nil && pid > 0 {
				return pid
			}
		}
	}
	return 0
}
