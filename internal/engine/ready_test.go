package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// verdicts records what the Observer is told of readiness.
type verdicts struct{ got []string }

func (v *verdicts) Committed([]service.Event) {}
func (v *verdicts) GroupCommitted(GroupStats) {}
func (v *verdicts) Ready(reason string)       { v.got = append(v.got, reason) }

// TestReadinessState: a write that fails for want of its storage makes the
// engine not ready, once, whatever the writes after it; a group that
// commits does not make it ready again until the checkpoint reaches the
// database file (SQLite); a failure that is not the storage's (a lock
// wait) changes nothing; on PostgreSQL a commit is enough.
func TestReadinessState(t *testing.T) {
	var log bytes.Buffer
	v := &verdicts{}
	r := &readiness{log: slog.New(slog.NewTextHandler(&log, nil)), obs: v}
	full := fmt.Errorf("%w: %w (is the disk full?): write failed", lk.ErrUnavailable, repo.ErrDiskFull)
	checkpoint := full
	cp := func() error { return checkpoint }

	r.failed(fmt.Errorf("%w: lock timeout", lk.ErrUnavailable))
	r.afterGroup(nil, cp)
	if r.state() != "" || len(v.got) != 0 {
		t.Fatalf("after a lock timeout: state %q, verdicts %q; want ready, none", r.state(), v.got)
	}
	r.failed(full)
	r.failed(full)
	r.afterGroup(full, cp)
	if r.state() != NotReadyDiskFull {
		t.Fatalf("after a full disk: state %q", r.state())
	}
	r.afterGroup(nil, cp) // the probe's commit fits the WAL's room; the checkpoint does not
	if r.state() != NotReadyDiskFull {
		t.Fatalf("a commit whose checkpoint failed made it ready: %q", r.state())
	}
	checkpoint = nil
	r.afterGroup(nil, cp)
	if r.state() != "" {
		t.Fatalf("after the checkpoint reached the file: %q", r.state())
	}
	if want := []string{NotReadyDiskFull, ""}; !equal(v.got, want) {
		t.Errorf("verdicts %q, want %q: each change told once", v.got, want)
	}
	if n := strings.Count(log.String(), "not ready"); n != 1 {
		t.Errorf("%d lines say not ready, want 1:\n%s", n, log.String())
	}

	pg := &readiness{log: slog.New(slog.DiscardHandler), obs: v, peers: true}
	pg.failed(fmt.Errorf("%w: %w: conn closed", lk.ErrUnavailable, repo.ErrDatabaseDown))
	if pg.state() != NotReadyDatabaseUnavailable {
		t.Fatalf("PostgreSQL out of reach: %q", pg.state())
	}
	pg.afterGroup(nil, func() error { t.Error("a checkpoint on PostgreSQL"); return nil })
	if pg.state() != "" {
		t.Errorf("PostgreSQL after a commit: %q", pg.state())
	}
}

func equal(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

// TestReadyDatabaseGone: once the database fails every transaction (here
// its handle is closed under the running engine, as a database that no
// longer answers), Ready reports the probe's failed commit; a drained
// engine reports shutting_down.
func TestReadyDatabaseGone(t *testing.T) {
	ctx := context.Background()
	e, err := Open(ctx, filepath.Join(t.TempDir(), "ready.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if reason, err := e.Ready(ctx); reason != "" || err != nil {
		t.Fatalf("ready: %q %v", reason, err)
	}
	if err := e.r.db.Close(); err != nil {
		t.Fatal(err)
	}
	if reason, err := e.Ready(ctx); reason != NotReadyCommitFailed || err == nil {
		t.Errorf("ready with the database gone: %q %v, want %q with the cause", reason, err, NotReadyCommitFailed)
	}
	e.Drain()
	if reason, err := e.Ready(ctx); reason != NotReadyShuttingDown || !errors.Is(err, ErrDraining) {
		t.Errorf("ready while draining: %q %v, want %q", reason, err, NotReadyShuttingDown)
	}
}
