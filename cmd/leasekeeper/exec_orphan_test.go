package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestExecWaits builds the binary once and runs, against real servers on
// loopback: exec and the Go client through a server's kill -9 and restart
// during their wait, exec's position while it waits, LEASEKEEPER_CA_FILE,
// and a server URL ending in /v1.
func TestExecWaits(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, bin string)
	}{
		{"no-orphan-wait", testExecNoOrphanWait},
		{"position", testExecPosition},
		{"ca-file-env", testCAFileEnv},
		{"server-url-v1", testServerURLWithV1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, bin)
		})
	}
}

// lockedBuffer is a bytes.Buffer that a running process writes to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startExec starts the binary with args, LEASEKEEPER_SERVER=base, and
// returns its output and a channel of its end.
func startExec(t *testing.T, ctx context.Context, bin, base string, args ...string) (stdout, stderr *lockedBuffer, exited <-chan error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_SERVER="+base)
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return stdout, stderr, done
}

// waitingFor reports whether client waits for lock, as the server says.
func waitingFor(c *client.Client, clientID, lock string) bool {
	cs, err := c.Status(context.Background(), clientID)
	return err == nil && cs.Waiting != nil && cs.Waiting.Lock == lock
}

// The scenario: etl-b holds ew (ttl 20); exec for etl-a waits for it
// (ttl 30, wait 30), and so does the Go client's Acquire for etl-c. The
// server is kill -9'ed 2 s in and restarted on the same file and address a
// second later. Both withdraw their requests, retrying until the restarted
// server answers: exec exits 75 without running its command, Acquire returns
// an *UnknownOutcomeError whose withdraw succeeded, and neither client is
// left queued for a lease nobody would renew, nor granted one when etl-b
// lets go. While it waited, exec printed its position.
func testExecNoOrphanWait(t *testing.T, bin string) {
	dir := t.TempDir()
	db := filepath.Join(dir, "orphan.db")
	srv := startServe(t, bin, db)
	base := srv.URL()
	c := client.New(srv.URL(), client.WithHTTPClient(&http.Client{Transport: apitest.New(t).Transport(t, nil)}))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if res, err := c.AcquireOnce(ctx, "ew", client.AcquireOptions{Client: "etl-b", TTL: 20 * time.Second}); err != nil || res.Outcome != lk.Granted {
		t.Fatalf("etl-b acquires ew: %+v, %v", res, err)
	}

	stdout, stderr, exited := startExec(t, ctx, bin, srv.URL(), "exec", "ew", "--client", "etl-a", "--ttl", "30", "--wait", "30", "--", "echo", "RAN")
	started := time.Now()
	testutil.Eventually(t, 10*time.Second, "etl-a queued for ew", func() bool { return waitingFor(c, "etl-a", "ew") })
	acquired := make(chan error, 1)
	go func() {
		l, err := c.Acquire(ctx, "ew", client.AcquireOptions{Client: "etl-c", TTL: 30 * time.Second, Wait: 30 * time.Second})
		if l != nil {
			l.Release(ctx)
		}
		acquired <- err
	}()
	testutil.Eventually(t, 10*time.Second, "etl-c queued for ew", func() bool { return waitingFor(c, "etl-c", "ew") })
	testutil.Eventually(t, 10*time.Second, "exec's position on stderr", func() bool {
		return strings.Contains(stderr.String(), `waiting for "ew": position 1`)
	})

	time.Sleep(time.Until(started.Add(2 * time.Second)))
	srv.Kill()
	time.Sleep(time.Second)
	srv.Start() // on its old address when it can
	if srv.URL() != base {
		t.Fatalf("the server came back on %s, not on %s where the clients retry: the port was taken meanwhile", srv.URL(), base)
	}

	select {
	case err := <-exited:
		if code := exitCode(err); code != exitQueued || strings.Contains(stdout.String(), "RAN") {
			t.Errorf("exec: exit %d, stdout %q, stderr %q; want %d (not obtained) and no RAN", code, stdout, stderr, exitQueued)
		}
		if !strings.Contains(stderr.String(), "withdrawn") {
			t.Errorf("exec's stderr %q does not say the request was withdrawn", stderr)
		}
		t.Logf("exec, %v after it started: %s", time.Since(started).Round(100*time.Millisecond), stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("exec still runs 60 s after the restart; stderr %q", stderr)
	}
	select {
	case err := <-acquired:
		var unknown *client.UnknownOutcomeError
		if !errors.As(err, &unknown) || unknown.WithdrawErr != nil {
			t.Errorf("the Go client's Acquire: %v; want an *UnknownOutcomeError, withdrawn", err)
		}
		t.Logf("Acquire: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the Go client's Acquire still runs 60 s after the restart")
	}

	for _, id := range []string{"etl-a", "etl-c"} {
		if cs, err := c.Status(ctx, id); err != nil || cs.Waiting != nil || len(cs.Holds) != 0 {
			t.Errorf("%s after the restart: %+v, %v; want neither waiting nor holding", id, cs, err)
		}
	}
	// etl-b lets go: nobody was left in line to be granted a lease that
	// nothing renews.
	if out, err := c.Release(ctx, "etl-b", "ew"); err != nil || out.Outcome != lk.Released {
		t.Errorf("etl-b releases ew: %+v, %v", out, err)
	}
	if st, err := c.Inspect(ctx, "ew"); err != nil || len(st.Holders) != 0 || len(st.Queue) != 0 {
		t.Errorf("ew after etl-b's release: %+v, %v; want free, nobody queued", st, err)
	}
}

// While exec waits it prints its position on standard error when it changes;
// it stays quiet when it gets the lock at once.
func testExecPosition(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := s.Acquire(ctx, "L", client.AcquireOptions{Client: "a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "b", TTL: 30 * time.Second}); err != nil || res.Outcome != lk.Queued {
		t.Fatalf("b queues for L: %+v, %v", res, err)
	}
	stdout, stderr, exited := startExec(t, ctx, bin, s.url, "exec", "L", "--client", "c", "--ttl", "30", "--wait", "30", "--", "echo", "ran")
	testutil.Eventually(t, 10*time.Second, "position 2 on stderr", func() bool {
		return strings.Contains(stderr.String(), `leasekeeper: exec: waiting for "L": position 2`)
	})
	if out, err := s.Release(ctx, "b", "L"); err != nil || out.Outcome != lk.Withdrawn {
		t.Fatalf("withdrawing b: %+v, %v", out, err)
	}
	testutil.Eventually(t, 15*time.Second, "position 1 on stderr", func() bool {
		return strings.Contains(stderr.String(), `waiting for "L": position 1`)
	})
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if code := exitCode(err); code != 0 || stdout.String() != "ran\n" {
			t.Errorf("exec: exit %d, stdout %q, stderr %q; want 0 and ran", code, stdout, stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec not done 20 s after a released L")
	}
	t.Logf("stderr: %s", stderr)
	if n := strings.Count(stderr.String(), "position"); n != 2 {
		t.Errorf("%d position lines, want 2 (one per position):\n%s", n, stderr)
	}
	// Granted at once: nothing on stderr.
	r := expect(t, bin, s.url, 0, "ran", "exec", "L", "--client", "c", "--ttl", "30", "--wait", "30", "--", "echo", "ran")
	if r.stderr != "" {
		t.Errorf("exec granted at once wrote %q on stderr", r.stderr)
	}
}

// LEASEKEEPER_CA_FILE is trusted as --ca-file is, and exec passes the CA file
// on to its command, as an absolute path, so that the leasekeeper commands
// the job runs reach the same https server.
func testCAFileEnv(t *testing.T, bin string) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestPKI(t, dir)
	srv := startServe(t, bin, filepath.Join(dir, "tls.db"), "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("serve with a certificate listens on %s", srv.URL())
	}
	plain := startCLIServer(t)
	run := func(code int, want string, env []string, args ...string) cliResult {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir // --ca-file ca.pem is relative to it
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "LEASEKEEPER_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		r := cliResult{code: exitCode(cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
		if r.code != code || strings.TrimSuffix(r.stdout, "\n") != want {
			t.Errorf("%v leasekeeper %s: exit %d, stdout %q, stderr %q; want %d, %q", env, strings.Join(args, " "), r.code, r.stdout, r.stderr, code, want)
		}
		return r
	}
	free := `{"lock":"L","holders":[],"queue":[],"holder_count":0,"queue_length":0}`
	ca := caFileEnv + "=" + caFile
	run(0, free, []string{serverEnv + "=" + srv.URL(), ca}, "inspect", "L")
	// A bare host:port is https with the variable, as with --ca-file.
	run(0, free, []string{serverEnv + "=" + strings.TrimPrefix(srv.URL(), "https://"), ca}, "inspect", "L")
	// Without it, the system's roots do not trust the test CA.
	run(exitNoAnswer, "", []string{serverEnv + "=" + srv.URL()}, "inspect", "L")
	// A plain http:// server has nothing to verify: the variable is not
	// in the way (--ca-file there is a usage error).
	run(0, free, []string{serverEnv + "=" + plain.url, ca}, "inspect", "L")

	// exec --ca-file, with no variable in its environment: the job, in
	// another directory, writes with the lease's token through the same
	// server.
	job := "cd / && " + shellQuote(bin) + ` write "$LEASEKEEPER_LOCK" k v --token "$LEASEKEEPER_TOKEN" && echo "$LEASEKEEPER_CA_FILE"`
	run(0, `{"outcome":"ok"}`+"\n"+caFile, []string{serverEnv + "=" + srv.URL()},
		"exec", "L", "--client", "a", "--ttl", "10", "--ca-file", "ca.pem", "--", "sh", "-c", job)
	run(0, `{"value":"v","token":1}`, []string{serverEnv + "=" + srv.URL(), ca}, "read", "L", "k")
}

// A server URL ending in /v1 (a slip) reaches the server's root, and exec
// passes the root on.
func testServerURLWithV1(t *testing.T, bin string) {
	s := startCLIServer(t)
	expect(t, bin, s.url+"/v1", 0, `{"lock":"L","holders":[],"queue":[],"holder_count":0,"queue_length":0}`, "inspect", "L")
	expect(t, bin, "http://127.0.0.1:1", 0, `{"lock":"L","holders":[],"queue":[],"holder_count":0,"queue_length":0}`, "inspect", "L", "--server", s.url+"/v1/")
	expect(t, bin, s.url+"/v1", 0, s.url, "exec", "L", "--client", "a", "--ttl", "5", "--", "sh", "-c", `echo "$LEASEKEEPER_SERVER"`)
}
