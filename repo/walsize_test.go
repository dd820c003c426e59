package repo

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
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
	}{{"full.db", "FULL", true}, {"extra.db", "EXTRA", true}, {"normal.db", "", false}, {"off.db", "OFF", false}} {
		path := filepath.Join(dir, c.name)
		for open := 1; open <= 2; open++ {
			d, err := Open(ctx, path, Options{Synchronous: c.sync})
			if err != nil {
				t.Fatal(err)
			}
			if got := walSize(t, path); (got >= walFull) != c.grown {
				t.Errorf("%s, open %d: the WAL is %d bytes; grown to %d: %v, want %v", c.name, open, got, walFull, got >= walFull, c.grown)
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
		if _, err := d.conn.ExecContext(ctx, `INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`,
			i+1, "c"+strconv.Itoa(i), i); err != nil {
			t.Fatal(err)
		}
	}
	if got := walSize(t, path); got != walFull {
		t.Fatalf("the WAL is %d bytes after %d small commits, want the %d it was grown to", got, n, walFull)
	}
	crashed := filepath.Join(t.TempDir(), "lk.db")
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, crashed+suffix)
	}
	c, err := Open(ctx, crashed, Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int
	if err := c.conn.GetContext(ctx, &got, `SELECT count(*) FROM clients`); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Errorf("the crash's copy has %d clients, want the %d committed", got, n)
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
				if _, err := d.conn.ExecContext(ctx, `INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`,
					i+1, "c"+strconv.Itoa(i), i); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got := walSize(b, path); got > walFull {
				b.Fatalf("the WAL grew past its full size (%d bytes): the benchmark ran past the first fill", got)
			}
		})
	}
}
