package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestReadyDatabaseGone: once the database fails every transaction (here
// its handle is closed under the running engine, as a database that no
// longer answers), Ready reports the probe's failed commit as
// ErrNotReady, with the cause; a drained engine reports ErrDraining.
func TestReadyDatabaseGone(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, filepath.Join(t.TempDir(), "ready.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := e.r.db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(ctx); !errors.Is(err, ErrNotReady) || err == ErrNotReady {
		t.Errorf("ready with the database gone: %v, want ErrNotReady with its cause", err)
	}
	e.Drain()
	if err := e.Ready(ctx); !errors.Is(err, ErrDraining) {
		t.Errorf("ready while draining: %v, want ErrDraining", err)
	}
}
