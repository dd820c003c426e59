package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// exec puts the lock, client, token and server in the command's environment,
// and releases when the command ends.
func testExecEnv(t *testing.T, bin string) {
	s := startCLIServer(t)
	r := expect(t, bin, s.url, 0, "1 L a "+s.url, "exec", "L", "--client", "a", "--ttl", "5", "--",
		"sh", "-c", `echo $LEASEKEEPER_TOKEN $LEASEKEEPER_LOCK $LEASEKEEPER_CLIENT $LEASEKEEPER_SERVER`)
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing", r.stderr)
	}
	if holds(s, "a", "L") {
		t.Error("a still holds L after exec")
	}
	// The command's standard input is exec's, and the next grant's token is 2.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, stdout, stderr := cliCommand(ctx, bin, s.url, "exec", "L", "--client", "a", "--ttl", "5", "--", "sh", "-c", `read x; echo "$x $LEASEKEEPER_TOKEN"`)
	cmd.Stdin = strings.NewReader("hello\n")
	if err := cmd.Run(); err != nil || stdout.String() != "hello 2\n" {
		t.Errorf("exec with stdin: %v, stdout %q, stderr %q", err, stdout, stderr)
	}
}

// A 3-second lease is kept alive through a 6-second command. (A lease of
// 2 s leaves each renew a third of a second before the client must count
// the lease lost: too little on a busy machine.)
func testExecKeepAlive(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, stdout, stderr := cliCommand(ctx, bin, s.url, "exec", "L", "--client", "a", "--ttl", "3", "--", "sh", "-c", "sleep 6; echo done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "a holds L", func() bool { return holds(s, "a", "L") })
	time.Sleep(4 * time.Second) // past the lease's length: held only if renewed
	st, err := s.Inspect(ctx, "L")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Client != "a" || st.Holders[0].Token != 1 {
		t.Errorf("4s into a 3s lease: %+v, %v; want a holding token 1", st, err)
	}
	err = cmd.Wait()
	if exitCode(err) != 0 || stdout.String() != "done\n" || stderr.Len() != 0 {
		t.Errorf("exec: exit %d, stdout %q, stderr %q", exitCode(err), stdout, stderr)
	}
	if holds(s, "a", "L") {
		t.Error("a still holds L after exec")
	}
}

// A lease released from elsewhere stops the command with SIGTERM, and exec
// exits with the lost status; a command that ignores SIGTERM gets SIGKILL
// after the grace.
func testExecLost(t *testing.T, bin string) {
	for _, tc := range []struct {
		name    string
		argv    []string
		grace   string
		stderr  string
		maxTime time.Duration
	}{
		{"sigterm", []string{"sleep", "30"}, "10", "signal: terminated", 4 * time.Second},
		{"sigkill", []string{"sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`}, "1", "signal: killed", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startCLIServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			args := append([]string{"exec", "L", "--client", "a", "--ttl", "3", "--grace", tc.grace, "--"}, tc.argv...)
			cmd, _, stderr := cliCommand(ctx, bin, s.url, args...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 5*time.Second, "a holds L", func() bool { return holds(s, "a", "L") })
			time.Sleep(200 * time.Millisecond) // let the command start
			if out, err := s.Release(ctx, "a", "L"); out.Outcome != lk.Released || err != nil {
				t.Fatalf("release from elsewhere: %+v, %v", out, err)
			}
			released := time.Now()
			err := cmd.Wait()
			if d := time.Since(released); d > tc.maxTime {
				t.Errorf("exec ended %v after the release; the next renew was due within 1s", d)
			}
			if code := exitCode(err); code != exitLost || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitLost, tc.stderr)
			}
			t.Logf("stderr: %s", stderr)
		})
	}
}

// The command's exit status passes through; death by signal N is 128+N; a
// missing command is 127.
func testExecStatus(t *testing.T, bin string) {
	s := startCLIServer(t)
	expect(t, bin, s.url, 7, "", "exec", "L", "--client", "a", "--ttl", "5", "--", "sh", "-c", "exit 7")
	expect(t, bin, s.url, 128+int(syscall.SIGTERM), "", "exec", "L", "--client", "a", "--ttl", "5", "--", "sh", "-c", "kill -TERM $$")
	r := expect(t, bin, s.url, exitNotFound, "", "exec", "L", "--client", "a", "--ttl", "5", "--", "leasekeeper-no-such-command")
	if !strings.Contains(r.stderr, "not found") {
		t.Errorf("stderr %q", r.stderr)
	}
	// Without --, a command without flags of its own works too.
	expect(t, bin, s.url, 0, "hi", "exec", "L", "--client", "a", "--ttl", "5", "echo", "hi")
	if holds(s, "a", "L") {
		t.Error("a still holds L after exec")
	}
}

// When the lock is not obtained the command does not run: 75 still queued
// (and withdrawn), 76 aborted as a deadlock victim, 1 another error result.
func testExecNotObtained(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx := context.Background()
	x, err := s.Acquire(ctx, "L2", client.AcquireOptions{Client: "x", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release(ctx)
	y, err := s.Acquire(ctx, "L1", client.AcquireOptions{Client: "y", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Release(ctx)

	start := time.Now()
	r := expect(t, bin, s.url, exitQueued, "", "exec", "L1", "--client", "z", "--ttl", "5", "--wait", "1", "--", "echo", "ran")
	if d := time.Since(start); d < time.Second || !strings.Contains(r.stderr, "still queued") {
		t.Errorf("after %v, stderr %q; want a 1s wait and still queued", d, r.stderr)
	}
	if st, err := s.Inspect(ctx, "L1"); err != nil || len(st.Queue) != 0 {
		t.Errorf("L1 after exec gave up: %+v, %v; want z withdrawn", st, err)
	}

	// y is already registered (age 2); x (age 1) queues for L1 behind y, and
	// y's exec asking for x's L2 closes the cycle: y, the younger, is aborted.
	if res, err := s.AcquireOnce(ctx, "L1", client.AcquireOptions{Client: "x", TTL: 30 * time.Second}); err != nil || res.Outcome != lk.Queued || res.Position != 1 {
		t.Fatalf("x queues for L1: %+v, %v", res, err)
	}
	r = expect(t, bin, s.url, exitDeadlock, "", "exec", "L2", "--client", "y", "--ttl", "5", "--", "echo", "ran")
	if !strings.Contains(r.stderr, "deadlock") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = expect(t, bin, s.url, exitErrorResult, "", "exec", "L1", "--client", "x", "--ttl", "5", "--", "echo", "ran")
	if !strings.Contains(r.stderr, "client busy") {
		t.Errorf("stderr %q", r.stderr)
	}
	r = expect(t, bin, s.url, exitErrorResult, "", "exec", "L3", "--client", "x", "--ttl", "0", "--", "echo", "ran")
	if !strings.Contains(r.stderr, "invalid ttl: ttl must be from 1 to 86400 seconds, got 0") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// A SIGTERM to exec reaches the command; exec releases and exits as the
// command did. A SIGINT during the wait withdraws the request: 130.
func testExecSignal(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, _, stderr := cliCommand(ctx, bin, s.url, "exec", "L", "--client", "a", "--ttl", "30", "--", "sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "a holds L", func() bool { return holds(s, "a", "L") })
	time.Sleep(200 * time.Millisecond)

	waiter, _, waiterStderr := cliCommand(ctx, bin, s.url, "exec", "L", "--client", "b", "--ttl", "30", "--wait", "30", "--", "echo", "ran")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "b queued for L", func() bool {
		cs, err := s.Status(ctx, "b")
		return err == nil && cs.Waiting != nil && cs.Waiting.Lock == "L"
	})
	waiter.Process.Signal(syscall.SIGINT)
	if code := exitCode(waiter.Wait()); code != 128+int(syscall.SIGINT) {
		t.Errorf("SIGINT while waiting: exit %d, stderr %q; want %d", code, waiterStderr, 128+int(syscall.SIGINT))
	}
	if cs, err := s.Status(ctx, "b"); err != nil || cs.Waiting != nil || len(cs.Holds) != 0 {
		t.Errorf("b after its exec was interrupted: %+v, %v; want neither waiting nor holding", cs, err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if code := exitCode(err); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, stderr %q; want %d", code, stderr, 128+int(syscall.SIGTERM))
	}
	if holds(s, "a", "L") {
		t.Error("a still holds L after exec")
	}
}
