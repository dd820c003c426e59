package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestShuttingDownNotApplied (issue 20): an operation the closed engine
// never took is answered 503 shutting_down with "applied": false, the
// server's word that it did not happen, and the state shows nothing of it.
func TestShuttingDownNotApplied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.db")
	srv := testutil.StartServer(t, path, engine.Options{}, server.Options{})
	if err := srv.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/v1/acquire", "application/json", strings.NewReader(`{"client":"a","lock":"L","ttl":30}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || got["error"] != "shutting_down" || got["applied"] != false {
		t.Fatalf("got %d %v, want 503 shutting_down with \"applied\": false", resp.StatusCode, got)
	}
	srv.Stop()
	after := testutil.StartServer(t, path, engine.Options{}, server.Options{})
	resp, err = http.Get(after.URL + "/v1/status?client=a")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st map[string]any
	json.NewDecoder(resp.Body).Decode(&st)
	if holds, _ := st["holds"].([]any); len(holds) != 0 || st["waiting"] != nil {
		t.Errorf("status of a after the 503: %v, want nothing held or awaited", st)
	}
}
