package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
