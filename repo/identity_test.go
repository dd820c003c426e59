package repo

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

func serviceIDOf(t *testing.T, d *DB) string {
	t.Helper()
	tx, err := d.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, err := ServiceID(tx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestServiceID: every new database gets an identity of its own, 32 hex
// digits, which stays as it is across reopening.
func TestServiceID(t *testing.T) {
	ids := map[string]bool{}
	onEachDatabase(t, func(t *testing.T, name string, d *DB) {
		id := serviceIDOf(t, d)
		if !hex32.MatchString(id) {
			t.Errorf("%s: service_id %q is not 32 hex digits", name, id)
		}
		ids[id] = true
	})
	if len(ids) != 2 {
		t.Errorf("two new databases share an identity: %v", ids)
	}
	path := filepath.Join(t.TempDir(), "lk.db")
	var first string
	for i := 0; i < 2; i++ {
		d, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		id := serviceIDOf(t, d)
		d.Close()
		if i == 0 {
			first = id
		} else if id != first {
			t.Errorf("reopened, the identity changed from %s to %s", first, id)
		}
	}
}

// TestBackupNewServiceID: a backup's copy has an identity of its own, as
// its tokens fork from the original's when it is made.
func TestBackupNewServiceID(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "lk.db")
	d, err := Open(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig := serviceIDOf(t, d)
	d.Close()
	dst := filepath.Join(dir, "copy.db")
	if err := Backup(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if id := serviceIDOf(t, c); id == orig || !hex32.MatchString(id) {
		t.Errorf("the copy's identity is %q, the original's %q: want another", id, orig)
	}
}
