package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestReady: GET /v1/ready answers 200 while the database commits, 503
// unavailable once it cannot, and 503 shutting_down once the server drains;
// health goes on answering 200 through all of it.
func TestReady(t *testing.T) {
	f := start(t, 1000)
	status, v := f.call("GET", "/v1/ready", nil)
	if status != http.StatusOK {
		t.Fatalf("ready: HTTP %d %v", status, v)
	}
	expect(t, v, `{"status": "ready"}`)

	// The database goes away under the running server: a closed handle
	// fails every transaction, as a database that no longer answers does.
	if err := f.svc.Close(); err != nil {
		t.Fatal(err)
	}
	status, v = f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeUnavailable)
	if status, _ := f.call("GET", "/v1/health", nil); status != http.StatusOK {
		t.Errorf("health with the database gone: HTTP %d, want 200", status)
	}
}

// TestReadyWhileDraining: a stopping server is not ready, so that a load
// balancer moves on before the connections close.
func TestReadyWhileDraining(t *testing.T) {
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "ready.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(svc, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close(); svc.Close() }()
	f := &fixture{t: t, url: hs.URL, hc: validated(t)}
	if status, v := f.call("GET", "/v1/ready", nil); status != http.StatusOK {
		t.Fatalf("ready: HTTP %d %v", status, v)
	}
	srv.Drain()
	status, v := f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeShuttingDown)
}

// TestReadyIsOpen: ready asks the Authorizer as operation "ready", which
// auth.Authorizer lets through without a token (auth's matrix test).
func TestReadyIsOpen(t *testing.T) {
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "ready.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &denyAll{}
	srv := server.New(svc, server.Options{Authorizer: d})
	hs := httptest.NewServer(srv.Handler())
	defer func() { srv.Drain(); hs.Close(); srv.Close(); svc.Close() }()
	// Not validated: denyAll refuses what the document says is open.
	f := &fixture{t: t, url: hs.URL, hc: http.DefaultClient}
	status, v := f.call("GET", "/v1/ready", nil)
	expectError(t, status, v, lk.CodeForbidden, "denyAll refuses ready")
	if want := (server.Access{Op: "ready"}); len(d.asked) != 1 || d.asked[0] != want {
		t.Errorf("GET /v1/ready asked %+v, want %+v", d.asked, want)
	}
}
