package repo

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestReadApartFromWriter: Read answers from the last commit while a write
// transaction is open and holds the writers' lock (SQLite's write lock,
// PostgreSQL's service row), without waiting for it; leases that ended by
// now are left out; pages go on where the last one ended.
func TestReadApartFromWriter(t *testing.T) {
	ctx := context.Background()
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(ctx, c.path(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if !d.CanReadApart() {
				t.Fatal("a database file has no read connection")
			}
			tx, err := d.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			must(t, ClientRegister(tx, "a", 1, 0))
			must(t, LockGrant(tx, LeaseRow{Lock: "L1", Client: "a", Mode: lk.Exclusive, Token: 1, ExpiresAt: 10}, true, 1000))
			must(t, LockGrant(tx, LeaseRow{Lock: "L2", Client: "a", Mode: lk.Exclusive, Token: 1, ExpiresAt: 100}, true, 1000))
			must(t, tx.Commit())

			// A write under way, holding the lock every writer takes.
			w, err := d.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d.dialect.peers() {
				if _, err := ServiceRowLock(w, Warm{}); err != nil {
					t.Fatal(err)
				}
			}
			defer w.Rollback()
			if _, err := LeaseDelete(w, "L2", "a"); err != nil {
				t.Fatal(err)
			}

			read := func(now int64) (holds []string, locks []string, held, waiting int64) {
				t.Helper()
				err := d.Read(ctx, func(tx *Tx) error {
					page, _, err := HoldsPage(tx, "a", "", NoLimit, now)
					for _, h := range page {
						holds = append(holds, h.Lock)
					}
					if err != nil {
						return err
					}
					ls, _, _, err := LocksLive(tx, "", "", lk.MaxLocksLimit, now)
					for _, l := range ls {
						locks = append(locks, l.Lock)
					}
					if err != nil {
						return err
					}
					held, waiting, err = LiveCounts(tx, now)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return holds, locks, held, waiting
			}
			// The uncommitted release of L2 is not seen; L1 ended at 10.
			if h, l, held, waiting := read(5); !slices.Equal(h, []string{"L1", "L2"}) || !slices.Equal(l, h) || held != 2 || waiting != 0 {
				t.Errorf("at 5: holds %v, locks %v, counts %d %d; want [L1 L2] twice, 2 0", h, l, held, waiting)
			}
			if h, l, held, _ := read(10); !slices.Equal(h, []string{"L2"}) || !slices.Equal(l, h) || held != 1 {
				t.Errorf("at 10: holds %v, locks %v, %d held; want [L2] twice, 1", h, l, held)
			}

			// Read-only: a statement that writes fails there.
			err = d.Read(ctx, func(tx *Tx) error {
				_, err := LeaseDelete(tx, "L1", "a")
				return err
			})
			if err == nil {
				t.Error("a delete ran in Read")
			}

			err = d.Read(ctx, func(tx *Tx) error {
				first, more, err := HoldsPage(tx, "a", "", 1, 5)
				if err != nil {
					return err
				}
				rest, last, err := HoldsPage(tx, "a", first[0].Lock, 1, 5)
				if len(first) != 1 || first[0].Lock != "L1" || !more || len(rest) != 1 || rest[0].Lock != "L2" || last {
					t.Errorf("pages of 1: %v (more %v) then %v (more %v)", first, more, rest, last)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReadsUnsettled: a lease that ended with clients waiting for its lock
// makes the lock's listing and the waiter's status unsettled: its
// retirement hands the lock over, which only a write transaction knows.
func TestReadsUnsettled(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "read.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tx, err := d.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	must(t, ClientRegister(tx, "a", 1, 0))
	must(t, ClientRegister(tx, "b", 2, 0))
	must(t, LockGrant(tx, LeaseRow{Lock: "L", Client: "a", Mode: lk.Exclusive, Token: 1, ExpiresAt: 10}, true, 1000))
	must(t, LockGrant(tx, LeaseRow{Lock: "M", Client: "a", Mode: lk.Exclusive, Token: 1, ExpiresAt: 10}, true, 1000))
	must(t, LockEnqueue(tx, "L"))
	must(t, QueueAppend(tx, QueueEntry{Lock: "L", Position: 1, Client: "b", Mode: lk.Exclusive, TTL: 10}))
	must(t, tx.Commit())
	for _, c := range []struct {
		now       int64
		unsettled bool
		locks     string
	}{
		{9, false, "[{L [{ a exclusive 1 10}] 1 1 <nil>} {M [{ a exclusive 1 10}] 1 0 <nil>}]"},
		{10, true, "[{L [] 0 1 <nil>}]"}, // M, free and awaited by nobody, is left out
	} {
		err := d.Read(ctx, func(tx *Tx) error {
			page, _, unsettled, err := LocksLive(tx, "", "", 10, c.now)
			if err != nil {
				return err
			}
			// b, queued at 0, has waited now seconds (then cleared: a
			// pointer does not print as its value).
			if len(page) == 0 || page[0].OldestWaitS == nil || *page[0].OldestWaitS != c.now {
				t.Errorf("at %d: the first lock's oldest wait is %v, want %d", c.now, page[0].OldestWaitS, c.now)
			}
			for i := range page {
				page[i].OldestWaitS = nil
			}
			head, err := ClientHeadGet(tx, "b", c.now)
			if got := fmt.Sprint(page); unsettled != c.unsettled || got != c.locks || head.Unsettled != c.unsettled || head.WaitingFor != "L" {
				t.Errorf("at %d: locks %s, unsettled %v; b's %+v; want %s, unsettled %v", c.now, got, unsettled, head, c.locks, c.unsettled)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadsDuringCommits: readers, more of them than read connections,
// read while the writer commits; each sees the commits in order, never one
// it saw undone.
func TestReadsDuringCommits(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "read.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const commits, readers = 200, 3 * readConns
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			for {
				var held int64
				err := d.Read(ctx, func(tx *Tx) error {
					var err error
					held, _, err = LiveCounts(tx, 0)
					return err
				})
				if err != nil || held < last {
					t.Errorf("read %d locks held after %d: %v", held, last, err)
					return
				}
				last = held
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	for i := range commits {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		must(t, LockGrant(tx, LeaseRow{Lock: fmt.Sprintf("L%03d", i), Client: "a", Mode: lk.Exclusive, Token: 1, ExpiresAt: 10}, true, 1000))
		must(t, tx.Commit())
	}
	close(done)
	wg.Wait()
}

// TestReadInMemory: a private in-memory database exists on the writer's
// connection only, so it has no reader.
func TestReadInMemory(t *testing.T) {
	d, err := Open(context.Background(), MemoryPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Read(context.Background(), func(*Tx) error { return nil })
	if d.CanReadApart() || !errors.Is(err, ErrNoReadConnection) {
		t.Errorf("CanReadApart %v, Read: %v; want false, ErrNoReadConnection", d.CanReadApart(), err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
