package client_test

import (
	"errors"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// TestStoreAndGraph: the client reads a lock's fenced store a page at a
// time and the wait-for graph around a lock or a client.
func TestStoreAndGraph(t *testing.T) {
	s := newServer(t, engine.NewManualClock(time.Unix(1000, 0)))
	ctx := ctxT(t)
	acquire := func(who, lock string) lk.AcquireResult {
		t.Helper()
		r, err := s.AcquireOnce(ctx, lock, client.AcquireOptions{Client: who, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	g := acquire("a", "L")
	for _, k := range []string{"k2", "k1"} {
		if _, err := s.Write(ctx, "L", k, "v", g.Token); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Store(ctx, lk.StoreRequest{Lock: "L", Limit: 1})
	if err != nil || len(page.Keys) != 1 || page.Keys[0].Key != "k1" || page.Keys[0].Token != g.Token ||
		page.Next == nil || page.KeyCount != 2 || page.Highest == nil || *page.Highest != g.Token {
		t.Fatalf("first page of L's store: %+v, %v", page, err)
	}
	page, err = s.Store(ctx, lk.StoreRequest{Lock: "L", After: *page.Next})
	if err != nil || len(page.Keys) != 1 || page.Keys[0].Key != "k2" || page.Next != nil {
		t.Fatalf("second page of L's store: %+v, %v", page, err)
	}

	acquire("b", "L") // queued behind a
	graph, err := s.Graph(ctx, lk.GraphRequest{Client: "b"})
	if err != nil || len(graph.Locks) != 1 || len(graph.Clients) != 2 || len(graph.Holds) != 1 || len(graph.Waits) != 1 ||
		graph.Waits[0] != (lk.GraphWait{Client: "b", Lock: "L", Mode: lk.Exclusive, QueuedAt: 1000}) {
		t.Fatalf("graph around b: %+v, %v", graph, err)
	}
	if _, err := s.Graph(ctx, lk.GraphRequest{}); !errors.Is(err, client.ErrInvalidArguments) {
		t.Errorf("graph around nothing: %v, want invalid_arguments", err)
	}
}
