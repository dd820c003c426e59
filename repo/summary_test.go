package repo_test

import (
	"context"
	"testing"

	"github.com/leasekeeper/leasekeeper/repo"
)

// TestDatabaseSummary counts every lock row and finds the highest token of
// any lock, which serve logs at start.
func TestDatabaseSummary(t *testing.T) {
	d, err := repo.Open(context.Background(), repo.MemoryPath, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if s, err := repo.DatabaseSummary(tx); err != nil || s != (repo.Summary{}) {
		t.Errorf("summary of a new database = %+v, %v; want zeros", s, err)
	}
	for _, op := range []struct {
		lock   string
		tokens int
	}{{"a", 3}, {"b", 1}, {"c", 0}} { // a lock's first token is 1, taken as it is created

		if err := repo.LockCreate(tx, op.lock, 1); err != nil {
			t.Fatal(err)
		}
		for range op.tokens {
			if err := repo.LockTakeToken(tx, op.lock); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s, err := repo.DatabaseSummary(tx); err != nil || s != (repo.Summary{Locks: 3, HighestToken: 4}) {
		t.Errorf("summary = %+v, %v; want 3 locks, highest token 4", s, err)
	}
}
