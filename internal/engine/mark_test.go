package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestMarkSyncsOnlyPerBlock: the mark follows every commit (saw) with a
// write and no sync, and syncs only when a commit crosses its reservation,
// which then moves a block ahead of it.
func TestMarkSyncsOnlyPerBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.mark")
	m, existed, err := openMark(path)
	if err != nil || existed {
		t.Fatalf("openMark on nothing: %v, existed %v", err, existed)
	}
	defer m.close()
	m.rec.Version = 1
	commits := 3 * markBlock
	for i := 1; i <= commits; i++ {
		c := markCounters{Token: int64(i), EventID: 2 * int64(i), ClientAge: 1, Clock: int64(i)}
		if err := m.reserve(c); err != nil {
			t.Fatal(err)
		}
		if c.Token > m.rec.Reserved.Token || c.EventID > m.rec.Reserved.EventID || c.ClientAge > m.rec.Reserved.ClientAge {
			t.Fatalf("commit %d: %+v beyond the reservation %+v", i, c, m.rec.Reserved)
		}
		if err := m.saw(c); err != nil {
			t.Fatal(err)
		}
	}
	// Event ids run twice as fast as tokens: 6 blocks' worth, crossed
	// once at the first commit and then once a block.
	if m.syncs > 7 {
		t.Errorf("%d commits synced the mark %d times, want one a block (at most 7)", commits, m.syncs)
	}
	again, existed, err := openMark(path)
	if err != nil || !existed {
		t.Fatalf("openMark again: %v, existed %v", err, existed)
	}
	defer again.close()
	if again.rec != m.rec {
		t.Errorf("read back %+v, wrote %+v", again.rec, m.rec)
	}
	if got := behind(markCounters{Token: int64(commits) - 1, EventID: 2 * int64(commits), ClientAge: 1, Clock: int64(commits)}, again.rec.Seen); len(got) != 1 || !strings.Contains(got[0], "highest token") {
		t.Errorf("a database a token behind: %q, want the token named", got)
	}
}

// TestMarkUnreadable: a mark that is not one is refused with its name and
// what to do, and left as it was.
func TestMarkUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db.mark")
	if err := os.WriteFile(path, []byte("not a mark\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := openMark(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("openMark on a file that is not a mark: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "not a mark\n" {
		t.Errorf("the file became %q", b)
	}
}

// TestMarkRollbackForgottenLock: a database restored from a copy older than
// the locks its lost transactions created holds no row of them; after
// AcceptRollback such a lock, taken again, must not start from token 1
// again, and the next start must not find the database behind the mark it
// wrote when accepting (issue 20's token issued twice, for a lock the
// restored database never knew).
func TestMarkRollbackForgottenLock(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known []string // locks taken before the copy
	}{
		{"no lock in the copy", nil},
		{"another lock in the copy", []string{"kept"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := filepath.Join(t.TempDir(), "lk.db")
			mark := db + MarkSuffix
			take := func(e *Engine, lock string) int64 { return takeOnce(t, e, "c", lock) }
			open := func(accept bool) (*Engine, error) {
				return Open(ctx, db, Options{Mark: mark, AcceptRollback: accept})
			}

			e, err := open(false)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.known {
				take(e, l)
			}
			e.Close() // checkpoints: the file alone is the database
			copied, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}

			e, err = open(false)
			if err != nil {
				t.Fatal(err)
			}
			var lost int64
			for range 3 {
				lost = take(e, "lost")
			}
			e.Close()

			// The restore: the copy, without what came after it.
			if err := os.WriteFile(db, copied, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, suffix := range []string{"-wal", "-shm"} {
				os.Remove(db + suffix)
			}
			var rb *RollbackError
			if _, err := open(false); !errors.As(err, &rb) {
				t.Fatalf("Open on the restored copy: %v, want a *RollbackError", err)
			}
			e, err = open(true)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.known) > 0 {
				// In the run that accepted: the floor it keeps in memory.
				// (Without a lock in the copy, nothing is taken here: the
				// next start must find the database at its mark by the
				// floor alone.)
				if got := take(e, "lost"); got <= markBlock {
					t.Errorf("in the run that accepted the rollback, the lost lock's token is %d, not past the mark's reservation (%d; tokens up to %d were issued)", got, markBlock, lost)
				}
			}
			e.Close()
			// The next start must keep the floor the acceptance wrote
			// (read back from the file, not kept in memory).
			e, err = open(false)
			if err != nil {
				t.Fatalf("a start after the accepted rollback: %v", err)
			}
			defer e.Close()
			// Twice: the lock's row must start at its first token, not
			// at 1 under a lease of floor+1.
			for i := range 2 {
				if got := take(e, "lost"); got <= markBlock {
					t.Errorf("after the accepted rollback, grant %d of the lost lock has token %d, not past the mark's reservation (%d; tokens up to %d were issued): a token issued again", i+1, got, markBlock, lost)
				}
			}
			for _, l := range tc.known {
				if got := take(e, l); got <= markBlock {
					t.Errorf("after the accepted rollback %s's token is %d, not past the mark's reservation (%d)", l, got, markBlock)
				}
			}
		})
	}
}

// takeOnce acquires lock for client, exclusive, granted at once, and
// releases it: the token it was granted.
func takeOnce(t *testing.T, e *Engine, client, lock string) int64 {
	t.Helper()
	ctx := context.Background()
	res, err := e.Acquire(ctx, lk.AcquireRequest{Client: client, Lock: lock, TTL: 30, Mode: lk.Exclusive}, 0)
	if err != nil || res.Outcome != lk.Granted {
		t.Fatalf("acquire %s for %s: %+v, %v", lock, client, res, err)
	}
	if _, err := e.Release(ctx, lk.ReleaseRequest{Client: client, Lock: lock}); err != nil {
		t.Fatal(err)
	}
	return res.Token
}
