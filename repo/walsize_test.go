package repo

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// walFull is the size growWAL gives the WAL, for SQLite's default page size.
const walFull = walHeader + walAutocheckpoint*(4096+walFrameHeader)

func walSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestWALGrownWhenEachCommitSyncs: a file opened to sync at each commit
// (serve) has its WAL at its full size before the first write, again after
// every open; one opened without (run, NORMAL) grows it as SQLite does.
func TestWALGrownWhenEachCommitSyncs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct {
		name, sync string
		grown      bool
		link       bool // opened through a symlink: SQLite names the WAL after its target
	}{{"full.db", "FULL", true, false}, {"extra.db", "EXTRA", true, false}, {"normal.db", "", false, false},
		{"off.db", "OFF", false, false}, {"linked.db", "FULL", true, true}} {
		path, open := filepath.Join(dir, c.name), filepath.Join(dir, c.name)
		if c.link {
			open = filepath.Join(dir, "link-to-"+c.name)
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path, open); err != nil {
				t.Fatal(err)
			}
		}
		for opening := 1; opening <= 2; opening++ {
			d, err := Open(ctx, open, Options{Synchronous: c.sync})
			if err != nil {
				t.Fatal(err)
			}
			if got := walSize(t, path); (got >= walFull) != c.grown {
				t.Errorf("%s, open %d: the WAL is %d bytes; grown to %d: %v, want %v", c.name, opening, got, walFull, got >= walFull, c.grown)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestWALGrownKeepsCommits: what a crash leaves of a grown WAL, its files
// as they are while the writer has them open, holds every commit. It fails
// when the zeros go over the frames already written.
func TestWALGrownKeepsCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "lk.db")
	d, err := Open(ctx, path, Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const n = 300
	for i := range n {
		commitClient(t, d, i)
	}
	if got := walSize(t, path); got != walFull {
		t.Fatalf("the WAL is %d bytes after %d small commits, want the %d it was grown to", got, n, walFull)
	}
	// The copy is opened as serve opens it: its WAL, frames recovered
	// and all, grown again.
	if got := countAfterCrash(t, path, "FULL"); got != n {
		t.Errorf("the crash's copy has %d clients, want the %d committed", got, n)
	}
}

// commitClient commits client number i in a transaction of its own.
func commitClient(tb testing.TB, d *DB, i int) {
	tb.Helper()
	if _, err := d.conn.ExecContext(context.Background(), `INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`,
		i+1, "c"+strconv.Itoa(i), i); err != nil {
		tb.Fatal(err)
	}
}

// walWithFrames opens a file without growing its WAL (NORMAL), and commits
// n rows into the WAL.
func walWithFrames(t *testing.T, n int) (*DB, string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lk.db")
	d, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for i := range n {
		commitClient(t, d, i)
	}
	return d, path
}

// countAfterCrash copies path and its WAL as a crash leaves them, opens
// the copy with synchronous sync, and counts its clients.
func countAfterCrash(t *testing.T, path, sync string) int {
	t.Helper()
	crashed := filepath.Join(t.TempDir(), "lk.db")
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, crashed+suffix)
	}
	c, err := Open(context.Background(), crashed, Options{Synchronous: sync})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int
	if err := c.conn.GetContext(context.Background(), &got, `SELECT count(*) FROM clients`); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestWALGrowFailureCutsBack: when the file system refuses the zeros part
// way, the WAL is cut back to its size before, and keeps every commit. It
// fails when the cut goes below that size.
func TestWALGrowFailureCutsBack(t *testing.T) {
	d, path := walWithFrames(t, 200)
	before := walSize(t, path)
	writes := 0
	growWALWrite = func(f *os.File, b []byte, at int64) (int, error) {
		if writes++; writes > 2 {
			return 0, syscall.ENOSPC
		}
		return f.WriteAt(b, at)
	}
	defer func() { growWALWrite = (*os.File).WriteAt }()
	err := d.growWAL(context.Background())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("growWAL with a full disk: %v, want the file system's refusal", err)
	}
	if got := walSize(t, path); got != before {
		t.Errorf("the WAL is %d bytes after the refused zeros, want the %d it was", got, before)
	}
	if got := countAfterCrash(t, path, ""); got != 200 {
		t.Errorf("the crash's copy has %d clients, want the 200 committed", got)
	}
}

// TestWALGrowOverTornFrame: a frame cut off at the WAL's end (a crash
// between its writes) is zeroed from its start, not completed by zeros.
// It fails when the zeros start at the file's end.
func TestWALGrowOverTornFrame(t *testing.T) {
	d, path := walWithFrames(t, 50)
	f, err := os.OpenFile(path+"-wal", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := walSize(t, path)
	if _, err := f.Write(bytes.Repeat([]byte{0xa5}, 100)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := d.growWAL(context.Background()); err != nil {
		t.Fatal(err)
	}
	wal, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(wal)) != walFull {
		t.Fatalf("the WAL is %d bytes, want %d", len(wal), walFull)
	}
	if i := bytes.IndexByte(wal[torn:], 0xa5); i >= 0 {
		t.Errorf("the torn frame's byte at %d is still there after the zeros", torn+int64(i))
	}
	if got := countAfterCrash(t, path, ""); got != 50 {
		t.Errorf("the crash's copy has %d clients, want the 50 committed", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkFirstCommits: small commits, each synced, on a new file, while
// its WAL fills for the first time: with the WAL grown at open (each sync
// over blocks already written) and as SQLite grows it (each sync after an
// append). Only the first walAutocheckpoint pages differ: run it with
// -benchtime of a few thousand commits (-benchtime=3000x).
func BenchmarkFirstCommits(b *testing.B) {
	for _, grown := range []bool{true, false} {
		name := "grown"
		if !grown {
			name = "growing"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "lk.db")
			// Opened to sync at each commit, or opened without, which
			// leaves the WAL as SQLite grows it, and told to sync after.
			sync := "FULL"
			if !grown {
				sync = "NORMAL"
			}
			d, err := Open(ctx, path, Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			if _, err := d.conn.ExecContext(ctx, `PRAGMA synchronous = FULL`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				commitClient(b, d, i)
			}
			b.StopTimer()
			if got := walSize(b, path); got > walFull {
				b.Fatalf("the WAL grew past its full size (%d bytes): the benchmark ran past the first fill", got)
			}
		})
	}
}

// TestWALGrowFailureWarns: an opening whose zeros the file system refuses
// still opens, and says so through Options.Warn (serve logs it).
func TestWALGrowFailureWarns(t *testing.T) {
	growWALWrite = func(*os.File, []byte, int64) (int, error) { return 0, syscall.ENOSPC }
	defer func() { growWALWrite = (*os.File).WriteAt }()
	var warned []string
	d, err := Open(context.Background(), filepath.Join(t.TempDir(), "lk.db"), Options{Synchronous: "FULL",
		Warn: func(msg string, args ...any) { warned = append(warned, msg) }})
	if err != nil {
		t.Fatalf("a refused WAL failed the opening: %v", err)
	}
	defer d.Close()
	if len(warned) != 1 {
		t.Errorf("warned %q, want one warning", warned)
	}
}

// walGrowWriterEnv names, for the test binary run again as another
// process, the file that process commits a row to (walGrowWriter).
const walGrowWriterEnv = "LEASEKEEPER_TEST_WALGROW_WRITER"

// TestWALGrowHoldsWriteLock: while growWAL writes its zeros, another
// process (as the sqlite3 shell would be) cannot commit to the file: it is
// told the file is busy, and its row, committed once growWAL is done, goes
// after the zeros rather than under them. It fails when growWAL writes
// without SQLite's write lock: the other process commits frames at the
// WAL's end, where the zeros then go, and its row is lost.
func TestWALGrowHoldsWriteLock(t *testing.T) {
	if path := os.Getenv(walGrowWriterEnv); path != "" {
		walGrowWriter(path)
		return
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "lk.db")
	// Opened without growing the WAL (NORMAL), so that growWAL, called
	// below, has zeros to write after these frames.
	d, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	const n = 50
	for i := range n {
		commitClient(t, d, i)
	}
	if got := walSize(t, path); got >= walFull {
		t.Fatalf("the WAL is %d bytes before growWAL, want less than %d", got, walFull)
	}

	writing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	calls := 0
	growWALWrite = func(f *os.File, b []byte, at int64) (int, error) {
		if calls++; calls == 1 {
			close(writing)
			// Bounded, so that a test that failed before its release
			// does not leave growWAL waiting.
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
		}
		return f.WriteAt(b, at)
	}
	var growErr error
	grown := make(chan struct{})
	// Registered before the wait for growWAL below, so it runs after it:
	// growWAL calls growWALWrite until it is done.
	defer func() { growWALWrite = (*os.File).WriteAt }()
	go func() {
		defer close(grown)
		growErr = d.growWAL(ctx)
	}()
	defer func() { free(); <-grown }()
	select {
	case <-writing:
	case <-grown:
		t.Fatalf("growWAL returned (%v) without writing zeros", growErr)
	case <-time.After(time.Minute):
		t.Fatal("growWAL wrote no zeros within a minute")
	}

	// Another process, not a connection of this one: SQLite's locks
	// between processes are the file's, which is what the sqlite3 shell
	// would meet.
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, os.Args[0], "-test.run=^TestWALGrowHoldsWriteLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), walGrowWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	said := make(chan string)
	go func() {
		defer close(said)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "walgrow-writer: "); ok {
				said <- s
			}
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case s, ok := <-said:
			if !ok {
				t.Fatalf("the other process ended without a word (%v)", cmd.Wait())
			}
			if strings.HasPrefix(s, "error") {
				t.Fatalf("the other process: %s", s)
			}
			return s
		case <-time.After(time.Minute):
			t.Fatal("the other process said nothing within a minute")
		}
		return ""
	}
	if s := next(); s == "committed" {
		t.Errorf("another process committed a row while growWAL wrote its zeros: growWAL holds no write lock")
	} else {
		// Released only now: the other process then waits for growWAL's
		// ROLLBACK (busy_timeout) and commits after it.
		free()
		if s := next(); s != "committed" {
			t.Fatalf("the other process said %q after growWAL, want committed", s)
		}
	}
	free()
	<-grown
	if growErr != nil {
		t.Fatal(growErr)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the other process: %v", err)
	}

	// What a crash leaves, then what a clean close and an opening as
	// serve's (the WAL checkpointed, then grown again) leave: the other
	// process's row in both.
	if got := countAfterCrash(t, path, ""); got != n+1 {
		t.Errorf("the crash's copy has %d clients, want the %d committed, the other process's too", got, n+1)
	}
	closed = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = Open(ctx, path, Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	closed = false
	var got int
	if err := d.conn.GetContext(ctx, &got, `SELECT count(*) FROM clients`); err != nil {
		t.Fatal(err)
	}
	if got != n+1 {
		t.Errorf("the file has %d clients after a close and an opening, want the %d committed", got, n+1)
	}
	var check string
	if err := d.conn.GetContext(ctx, &check, `PRAGMA integrity_check`); err != nil || check != "ok" {
		t.Errorf("integrity_check after a close and an opening: %q, %v", check, err)
	}
}

// walGrowWriter is TestWALGrowHoldsWriteLock's other process. It commits
// a row to the file at path, first without waiting for SQLite's write
// lock, so that a lock held is seen (busy) and not merely waited out, then
// waiting for it. It says what happened on standard output.
func walGrowWriter(path string) {
	say := func(s string) { fmt.Println("walgrow-writer:", s) }
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_pragma=busy_timeout(0)")
	if err != nil {
		say("error " + err.Error())
		return
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the busy_timeout below is the connection's
	insert := func() error {
		_, err := db.Exec(`INSERT INTO clients (age, name, registered_at) VALUES (1, 'other process', 0)`)
		return err
	}
	err = insert()
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
		say("busy")
		if _, err = db.Exec(`PRAGMA busy_timeout = 60000`); err == nil {
			err = insert()
		}
	}
	if err != nil {
		say("error " + err.Error())
		return
	}
	say("committed")
}

// TestWALGrowLetsGoWhenCancelled: a caller's context cancelled while the
// zeros are written still ends growWAL's transaction, so that the write
// lock is free for another connection. It fails when the transaction is
// ended under that context, which database/sql then never sends.
func TestWALGrowLetsGoWhenCancelled(t *testing.T) {
	d, path := walWithFrames(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	growWALWrite = func(f *os.File, b []byte, at int64) (int, error) {
		cancel()
		return f.WriteAt(b, at)
	}
	defer func() { growWALWrite = (*os.File).WriteAt }()
	d.growWAL(ctx) // its error is the cancelled context's, or none
	other, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	c, err := other.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("another connection's BEGIN IMMEDIATE after growWAL: %v", err)
	}
	if _, err := c.ExecContext(context.Background(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
}
