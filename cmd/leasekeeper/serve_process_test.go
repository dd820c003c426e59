package main

import (
	"os"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
)

// startServe starts `bin serve --db db` with extra flags at a free loopback
// port, on the robustness tests' harness (internal/e2e/cluster): a Cluster
// of one server, ready once GET /v1/ready answers 200, its URL https:// when extra
// give it a certificate. t.Cleanup kills it if it still runs and, when the
// test failed, shows the end of its log. Each call has a directory of its
// own for the logs (server-0.1.log, ... under go test -artifacts), so that
// a test may start servers one after another with other flags.
func startServe(t *testing.T, bin, db string, extra ...string) *cluster.Server {
	t.Helper()
	dir, err := os.MkdirTemp(t.ArtifactDir(), "serve-")
	if err != nil {
		t.Fatal(err)
	}
	srv := cluster.Start(t, cluster.Options{Binary: bin, Dir: dir, DB: db, Args: extra}).Servers[0]
	// The harness learned the address from --ready-file; what serve tells
	// its operator must be the same URL, scheme included, in either format.
	json, text := `"msg":"listening","url":"`+srv.URL()+`"`, "msg=listening url="+srv.URL()+" "
	if log := srv.Log(); !strings.Contains(log, json) && !strings.Contains(log, text) {
		t.Fatalf("serve's log says neither %s nor %s:\n%s", json, text, log)
	}
	return srv
}
