package repo

import (
	"context"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// onEachDatabase runs fn as a subtest on a fresh database of each dialect:
// SQLite in memory, and a new PostgreSQL schema.
func onEachDatabase(t *testing.T, fn func(t *testing.T, name string, d *DB)) {
	for _, c := range []struct {
		name string
		dsn  func(testing.TB) string
	}{
		{"sqlite", func(testing.TB) string { return MemoryPath }},
		{"postgres", pgtest.DSN},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := Open(context.Background(), c.dsn(t), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			fn(t, c.name, d)
		})
	}
}
