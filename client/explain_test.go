package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// newExplainingServer is newServer with answers that say why, as serve has
// them, on a manual clock.
func newExplainingServer(t *testing.T, clock engine.Clock) *testServer {
	t.Helper()
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), engine.Options{Rules: service.Config{Explain: true}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	ts := &testServer{Client: client.New(hs.URL, client.WithHTTPClient(validated(t, nil))), URL: hs.URL}
	ts.close = func() {

		hs.Close()
		eng.Close()
	}
	t.Cleanup(ts.close)
	return ts
}

// TestLeasePredecessors: a lease names the leases before its grant, a
// lapsed one among them; a deadlock victim's error says why it was chosen.
func TestLeasePredecessors(t *testing.T) {
	clock := engine.NewManualClock(time.Unix(1000, 0))
	s := newExplainingServer(t, clock)
	ctx := ctxT(t)
	if _, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "a", TTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	clock.Set(time.Unix(1010, 0)) // a lapsed at 1005
	l, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "b", TTL: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	ps := l.Predecessors()
	if len(ps) != 1 || ps[0].Client == nil || *ps[0].Client != "a" || ps[0].Token != 1 ||
		ps[0].Ended != lk.EndLapsed || ps[0].EndedAt != 1005 {
		t.Errorf("predecessors %+v, want a's token 1, lapsed at 1005", ps)
	}
	if lk.WorstEnding(ps) != lk.EndLapsed {
		t.Errorf("worst ending %q", lk.WorstEnding(ps))
	}

	// x (age 3) holds X and waits for Y; y (age 4), holding Y, asks for X.
	if _, err := s.AcquireOnce(ctx, "X", client.AcquireOptions{Client: "x", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireOnce(ctx, "Y", client.AcquireOptions{Client: "y", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireOnce(ctx, "Y", client.AcquireOptions{Client: "x", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, "X", client.AcquireOptions{Client: "y", TTL: time.Minute})
	var de *client.DeadlockError
	if !errors.As(err, &de) || len(de.Aborts) != 1 || de.Aborts[0].Age != 4 || len(de.Aborts[0].Cycle) != 2 ||
		*de.Aborts[0].Cycle[0].Client != "x" || de.Aborts[0].Cycle[0].WaitsFor != "Y" {
		t.Errorf("deadlock: %v, %+v", err, de)
	}
}
