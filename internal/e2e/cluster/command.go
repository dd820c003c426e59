package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// SetHistory makes h the history that gets the faults from now on: a soak
// checks its run in windows, each with a history of its own.
func (c *Cluster) SetHistory(h *history.History) {
	c.noteAnswerSettle(h)
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.opts.History = h
}

// StartCluster starts a Cluster for a command rather than a test (cmd/lkload
// measures servers on the same harness as the scenarios). opts.Dir is
// required, and opts.Binary unless the command may build one with `go
// build` from the module in its current directory. What would fail a test
// makes StartCluster return an error; later, a method of the Cluster that
// would fail a test panics. Close stops everything.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("e2e: StartCluster needs Options.Dir")
	}
	t := &commandTB{dir: opts.Dir}
	type started struct {
		c   *Cluster
		err error
	}
	done := make(chan started, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				f, ok := r.(commandFailure)
				if !ok {
					panic(r)
				}
				t.runCleanups()
				done <- started{err: f}
			}
		}()
		c := Start(t, opts)
		done <- started{c: c}
	}()
	select {
	case s := <-done:
		return s.c, s.err
	case <-ctx.Done():
		// The servers already started are stopped once the one under way
		// is ready or has failed (30 s at most).
		go func() {
			if s := <-done; s.c != nil {
				s.c.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Close stops the servers of a Cluster from StartCluster, all together,
// each with SIGTERM, then SIGKILL if it is still there 15 s later; then
// it undoes what Start set up. In a test, t.Cleanup does this.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, s := range c.Servers {
		wg.Go(func() { s.terminate(15 * time.Second) })
	}
	wg.Wait()
	if t, ok := c.t.(*commandTB); ok {
		t.runCleanups()
	}
}

// terminate is Stop without failing anything: SIGTERM, and SIGKILL after
// grace.
func (s *Server) terminate(grace time.Duration) {
	cmd, exited, paused := s.current()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
		s.forget(cmd)
	case <-time.After(grace):
		s.kill(false)
	}
}

// commandFailure is what commandTB.Fatalf panics with: an error, so that
// an uncaught one prints its message.
type commandFailure struct{ error }

// commandTB is the part of testing.TB that a Cluster uses, for a command.
// The embedded testing.TB is nil: a method the Cluster does not use is not
// there (a call panics).
type commandTB struct {
	testing.TB
	dir      string
	mu       sync.Mutex
	cleanups []func()
}

func (t *commandTB) Helper()             {}
func (t *commandTB) Failed() bool        { return false }
func (t *commandTB) ArtifactDir() string { return t.dir }
func (t *commandTB) Name() string        { return "command" }

func (t *commandTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// Errorf, which does not stop a test, only says.
func (t *commandTB) Errorf(format string, args ...any) { t.Logf(format, args...) }

func (t *commandTB) Fatalf(format string, args ...any) {
	panic(commandFailure{fmt.Errorf(format, args...)})
}

func (t *commandTB) Fatal(args ...any) { panic(commandFailure{errors.New(fmt.Sprint(args...))}) }

// Skipf: a command cannot skip what it asked for.
func (t *commandTB) Skipf(format string, args ...any) { t.Fatalf(format, args...) }

func (t *commandTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// runCleanups runs the cleanups, last registered first, once.
func (t *commandTB) runCleanups() {
	t.mu.Lock()
	fs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
