package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// startExplainingCLIServer is startCLIServer with answers that say why, as
// serve has them.
func startExplainingCLIServer(t *testing.T) *cliServer {
	t.Helper()
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), engine.Options{Rules: service.Config{Explain: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {

		hs.Close()
		eng.Close()
	})
	hc := &http.Client{Transport: apitest.New(t).Transport(t, nil)}
	return &cliServer{url: hs.URL, Client: client.New(hs.URL, client.WithHTTPClient(hc))}
}

// exec tells the command how the worst of its grant's predecessors ended,
// in LEASEKEEPER_PREDECESSOR_ENDED: absent on a lock's first grant (and
// not inherited from exec's own environment), then released after an
// exec that ended, revoked after an admin's revoke.
func testExecPredecessor(t *testing.T, bin string) {
	s := startExplainingCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run := func(want string) {
		t.Helper()
		cmd, stdout, stderr := cliCommand(ctx, bin, s.url, "exec", "L", "--client", "a", "--ttl", "5", "--",
			"sh", "-c", `echo "${LEASEKEEPER_PREDECESSOR_ENDED-absent}"`)
		cmd.Env = append(cmd.Env, "LEASEKEEPER_PREDECESSOR_ENDED=inherited")
		if err := cmd.Run(); err != nil || stdout.String() != want+"\n" {
			t.Errorf("exec: %v, stdout %q, stderr %q; want %q", err, stdout, stderr, want)
		}
	}
	run("absent")
	run("released")
	if _, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Revoke(ctx, "b", "L"); err != nil {
		t.Fatal(err)
	}
	run("revoked")
}
