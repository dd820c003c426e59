package server_test

import (
	"context"
	"encoding/json"
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
	expectNotReady(t, status, v, engine.NotReadyCommitTimeout, lk.CodeUnavailable)
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
	expectNotReady(t, status, v, engine.NotReadyShuttingDown, lk.CodeShuttingDown)
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

// expectNotReady checks ready's 503: the reason beside the error object's
// code and a message.
func expectNotReady(t *testing.T, status int, got any, reason string, code lk.ErrorCode) {
	t.Helper()
	m, _ := got.(map[string]any)
	msg, _ := m["message"].(string)
	if status != server.StatusOf(code) || len(m) != 4 || m["status"] != "not_ready" || m["reason"] != reason ||
		m["error"] != string(code) || msg == "" {
		g, _ := json.Marshal(got)
		t.Errorf("got HTTP %d %s, want %d {\"status\": \"not_ready\", \"reason\": %q, \"error\": %q, \"message\": ...}",
			status, g, server.StatusOf(code), reason, code)
	}
}
