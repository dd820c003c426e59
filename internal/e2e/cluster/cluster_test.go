package cluster

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}

// TestCluster: the harness's own moves on one server: ready after Start,
// not ready while paused (SIGSTOP) and ready again after SIGCONT, the same
// address after a kill and a start, gone after a graceful Stop, and every
// move noted in the history.
func TestCluster(t *testing.T) {
	h := history.New()
	c := Start(t, Options{History: h})
	s := c.Servers[0]
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return s.Ready(ctx)
	}
	if !ready() {
		t.Fatal("not ready after Start")
	}
	url := s.URL()
	s.Pause()
	if ready() {
		t.Error("ready while paused")
	}
	s.Resume()
	if !ready() {
		t.Error("not ready after Resume")
	}
	s.Kill()
	s.Start()
	if !ready() || s.URL() != url {
		t.Errorf("after a kill and a start: ready %v, URL %s (was %s)", ready(), s.URL(), url)
	}
	s.Stop()
	if s.Pid() != 0 || ready() {
		t.Error("still there after Stop")
	}
	var kinds []string
	for _, f := range h.Faults() {
		kinds = append(kinds, f.Kind)
	}
	if got, want := strings.Join(kinds, " "), "start pause resume kill start stop"; got != want {
		t.Errorf("faults noted: %s, want %s", got, want)
	}
	if logs := s.Logs(); len(logs) != 2 {
		t.Errorf("logs %v, want one per start", logs)
	}
}
