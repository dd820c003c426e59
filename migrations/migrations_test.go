package migrations_test

import (
	"io/fs"
	"reflect"
	"testing"

	"github.com/leasekeeper/leasekeeper/migrations"
)

// TestDialectsMatch: the dialects' migrations carry the same version
// numbers and names, so a version means the same tables on both.
func TestDialectsMatch(t *testing.T) {
	list := func(f fs.FS) []string {
		names, err := fs.Glob(f, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	sqlite, postgres := list(migrations.SQLite()), list(migrations.Postgres())
	if len(sqlite) == 0 {
		t.Fatal("no SQLite migrations embedded")
	}
	if !reflect.DeepEqual(sqlite, postgres) {
		t.Errorf("SQLite migrations %v, PostgreSQL migrations %v: each version needs both", sqlite, postgres)
	}
}
