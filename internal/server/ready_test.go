package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// TestReady: GET /v1/ready answers 200 while the database commits, and
// 503 unavailable while it cannot (here another writer holds the file's
// write lock past the probe's time); health goes on answering 200 through
// all of it. (engine's TestReadyDatabaseGone has a database that fails.)
func TestReady(t *testing.T) {
	f := start(t, 1000)
	status, v := f.call("GET", "/v1/ready", nil)
	if status != http.StatusOK {
		t.Fatalf("ready: HTTP %d %v", status, v)
	}
	expect(t, v, `{"status": "ready"}`)

	unblock := blockWriters(t, f.path)
	defer unblock()
	status, v = f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeUnavailable)
	if status, _ := f.call("GET", "/v1/health", nil); status != http.StatusOK {
		t.Errorf("health while the database does not commit: HTTP %d, want 200", status)
	}
}

// TestReadyWhileDraining: a stopping server is not ready, so that a load
// balancer moves on before the connections close.
func TestReadyWhileDraining(t *testing.T) {
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "ready.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); eng.Close() }()
	f := &fixture{t: t, url: hs.URL, hc: validated(t)}
	if status, v := f.call("GET", "/v1/ready", nil); status != http.StatusOK {
		t.Fatalf("ready: HTTP %d %v", status, v)
	}
	eng.Drain()
	status, v := f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeShuttingDown)
}

// TestReadyIsOpen: ready asks the Authorizer as operation "ready", which
// auth.Authorizer lets through without a token (auth's matrix test).
func TestReadyIsOpen(t *testing.T) {
	d := &denyAll{}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "ready.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: d})
	hs := httptest.NewServer(srv.Handler())
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	// Not validated: denyAll refuses what the document says is open.
	f := &fixture{t: t, url: hs.URL, hc: http.DefaultClient}
	status, v := f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeForbidden, "denyAll refuses ready")
	if want := (server.Access{Op: "ready"}); len(d.asked) != 1 || d.asked[0] != want {
		t.Errorf("GET /v1/ready asked %+v, want %+v", d.asked, want)
	}
}
