package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestExecWaitsThroughStop (issue 20): etl-b holds st; exec for etl-a
// waits for it (wait 30), and a blocked AcquireOnce for etl-c queues behind.
// Two seconds in, the server is stopped (SIGTERM) and restarted on the same
// file and address a second later; then etl-b releases. The stopping
// server answers etl-c's blocked acquire "queued" with reason
// server_stopping, not as a wait that ran out; exec does not give up (it
// used to exit 75, "when the wait ran out", 2 s into its 30 s wait), waits
// on through the restart, and runs its command with the lock well within
// its wait.
func TestExecWaitsThroughStop(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "stop.db")
	srv := startServe(t, bin, db)
	base := srv.URL()
	c := client.New(base)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if res, err := c.AcquireOnce(ctx, "st", client.AcquireOptions{Client: "etl-b", TTL: 60 * time.Second}); err != nil || res.Outcome != lk.Granted {
		t.Fatalf("etl-b acquires st: %+v, %v", res, err)
	}
	stdout, stderr, exited := startExec(t, ctx, bin, base, "exec", "st", "--client", "etl-a", "--ttl", "30", "--wait", "30", "--", "echo", "RAN")
	started := time.Now()
	testutil.Eventually(t, 10*time.Second, "etl-a queued for st", func() bool { return waitingFor(c, "etl-a", "st") })
	blocked := make(chan lk.AcquireResult, 1)
	go func() {
		res, err := c.AcquireOnce(ctx, "st", client.AcquireOptions{Client: "etl-c", TTL: 30 * time.Second, Wait: 30 * time.Second})
		if err != nil {
			t.Errorf("etl-c's blocked acquire: %v", err)
		}
		blocked <- res
	}()
	testutil.Eventually(t, 10*time.Second, "etl-c queued for st", func() bool { return waitingFor(c, "etl-c", "st") })

	time.Sleep(time.Until(started.Add(2 * time.Second)))
	srv.Stop()
	select {
	case res := <-blocked:
		if res.Outcome != lk.Queued || res.Reason != lk.ReasonServerStopping || res.Position != 2 {
			t.Errorf("etl-c's blocked acquire, answered by the stopping server: %+v; want queued at 2, reason %s", res, lk.ReasonServerStopping)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("etl-c's blocked acquire got no answer from the stopping server")
	}
	select {
	case err := <-exited:
		t.Fatalf("exec ended as its server stopped, %v after it started (exit %d): stderr %q",
			time.Since(started).Round(100*time.Millisecond), exitCode(err), stderr)
	case <-time.After(time.Second):
	}
	srv.Start()
	if srv.URL() != base {
		t.Fatalf("the server came back on %s, not on %s where exec waits: the port was taken meanwhile", srv.URL(), base)
	}
	if !waitingFor(c, "etl-a", "st") {
		t.Fatal("etl-a no longer waits for st after the restart")
	}
	released := time.Now()
	if _, err := c.Release(ctx, "etl-b", "st"); err != nil {
		t.Fatalf("etl-b releases st: %v", err)
	}
	select {
	case err := <-exited:
		if code := exitCode(err); code != 0 || !strings.Contains(stdout.String(), "RAN") {
			t.Fatalf("exec: exit %d, stdout %q, stderr %q; want 0 and RAN", code, stdout, stderr)
		}
		t.Logf("exec ran its command %v after the release, %v after it started; stderr %q",
			time.Since(released).Round(10*time.Millisecond), time.Since(started).Round(100*time.Millisecond), stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("exec did not run its command within 20 s of the release; stderr %q", stderr)
	}
	if _, err := c.Release(ctx, "etl-c", "st"); err != nil {
		t.Errorf("etl-c releases st: %v", err)
	}
}
