package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// exec A B C -- CMD (run by TestClientCLI): it takes the locks in
// canonical order within one wait, names them and their tokens as JSON
// arrays in the command's environment, with the service's identity; a
// failure part-way releases what was taken and names the lock that
// failed: 75 the wait ran out, 76 aborted by a client taking its locks in
// another order, 77 a lock taken lost while a later one was awaited.

func serviceID(t *testing.T, s *cliServer) string {
	t.Helper()
	h, err := s.Health(context.Background())
	if err != nil || len(h.ServiceID) != 32 {
		t.Fatalf("health: %+v, %v; want a service_id of 32 hex digits", h, err)
	}
	return h.ServiceID
}

func testExecSeveralEnv(t *testing.T, bin string) {
	s := startCLIServer(t)
	id := serviceID(t, s)
	show := `echo "$LEASEKEEPER_LOCKS $LEASEKEEPER_TOKENS ${LEASEKEEPER_LOCK-none} ${LEASEKEEPER_TOKEN-none} $LEASEKEEPER_SERVICE_ID"`
	// Given in any order, held in canonical order; "b c" has a space,
	// and the JSON says where each name ends.
	expect(t, bin, s.url, 0, `["a","b c","z"] [1,1,1] none none `+id,
		"exec", "z", "b c", "a", "--client", "j", "--ttl", "5", "--", "sh", "-c", show)
	for _, l := range []string{"a", "b c", "z"} {
		if holds(s, "j", l) {
			t.Errorf("j still holds %q after exec", l)
		}
	}
	// One lock keeps the single-lock variables, and has the arrays too.
	expect(t, bin, s.url, 0, `["a"] [2] a 2 `+id, "exec", "a", "--client", "j", "--ttl", "5", "--", "sh", "-c", show)
	// An outer exec's variables do not leak into an inner one's command.
	expect(t, bin, s.url, 0, `["q"] [1] q 1 `+id, "exec", "z", "a", "--client", "outer", "--ttl", "5", "--",
		bin, "exec", "q", "--client", "inner", "--ttl", "5", "--", "sh", "-c", show)
}

func testExecSeveralWait(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx := context.Background()
	x, err := s.Acquire(ctx, "B", client.AcquireOptions{Client: "x", TTL: 30 * time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Release(ctx)
	// B shared is compatible with x's shared lease.
	expect(t, bin, s.url, 0, "ran", "exec", "A", "B", "--shared-lock", "B", "--client", "j", "--ttl", "5", "--", "echo", "ran")
	// B exclusive is not: A was taken first, then the one wait ran out on
	// B; A is released, the request for B withdrawn.
	start := time.Now()
	r := expect(t, bin, s.url, exitQueued, "", "exec", "B", "A", "--client", "j", "--ttl", "5", "--wait", "1", "--", "echo", "ran")
	if d := time.Since(start); d < time.Second || d > 5*time.Second ||
		!strings.Contains(r.stderr, `"B" not obtained`) || !strings.Contains(r.stderr, "still queued") ||
		!strings.Contains(r.stderr, "the locks already taken were released") {
		t.Errorf("after %v, stderr %q", d, r.stderr)
	}
	for _, l := range []string{"A", "B"} {
		if st, err := s.Inspect(ctx, l); err != nil || len(st.Queue) != 0 || (l == "A" && len(st.Holders) != 0) {
			t.Errorf("%s after exec gave up: %+v, %v; want j neither holding nor queued", l, st, err)
		}
	}
}

// y holds B; j's exec takes A and waits for B; y then asks for A, out of
// canonical order, closing a cycle: j, the younger, is the victim.
func testExecSeveralAborted(t *testing.T, bin string) {
	s, ctx, cmd, stderr := startExecWaitingForB(t, bin, "10")
	res, err := s.AcquireOnce(ctx, "A", client.AcquireOptions{Client: "y", TTL: 30 * time.Second})
	if err != nil || res.Outcome != lk.Granted || len(res.Victims) != 1 || res.Victims[0] != "j" {
		t.Fatalf("y's acquire of A: %+v, %v; want granted, with j the victim", res, err)
	}
	if code := exitCode(cmd.Wait()); code != exitDeadlock || !strings.Contains(stderr.String(), `"B" not obtained`) ||
		!strings.Contains(stderr.String(), "deadlock") {
		t.Errorf("exit %d, stderr %q; want %d naming B", code, stderr, exitDeadlock)
	}
}

// j's exec holds A and waits for B; A is released from elsewhere: the
// lease is lost at its next renew, and exec gives up the wait: 77.
func testExecSeveralLost(t *testing.T, bin string) {
	s, ctx, cmd, stderr := startExecWaitingForB(t, bin, "3")
	if out, err := s.Release(ctx, "j", "A"); err != nil || out.Outcome != lk.Released {
		t.Fatalf("release from elsewhere: %+v, %v", out, err)
	}
	if code := exitCode(cmd.Wait()); code != exitLost || !strings.Contains(stderr.String(), `the lease on "A" was lost while a later lock was awaited`) {
		t.Errorf("exit %d, stderr %q; want %d naming A", code, stderr, exitLost)
	}
	if st, err := s.Status(ctx, "j"); err != nil || st.Waiting != nil || len(st.Holds) != 0 {
		t.Errorf("j after exec: %+v, %v; want neither waiting nor holding", st, err)
	}
}

// startExecWaitingForB starts a server on which y holds B, and j's exec
// of A and B (--ttl ttl, --wait 15), once it holds A and waits for B. The
// context lasts the test.
func startExecWaitingForB(t *testing.T, bin, ttl string) (*cliServer, context.Context, *exec.Cmd, *bytes.Buffer) {
	t.Helper()
	s := startCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	y, err := s.Acquire(ctx, "B", client.AcquireOptions{Client: "y", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { y.Release(ctx) })
	cmd, _, stderr := cliCommand(ctx, bin, s.url, "exec", "A", "B", "--client", "j", "--ttl", ttl, "--wait", "15", "--", "echo", "ran")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "j holds A and waits for B", func() bool {
		st, err := s.Status(ctx, "j")
		return err == nil && st.Waiting != nil && st.Waiting.Lock == "B" && len(st.Holds) == 1
	})
	return s, ctx, cmd, stderr
}

func testExecSeveralUsage(t *testing.T, bin string) {
	s := startCLIServer(t)
	for _, args := range [][]string{
		{"exec", "A", "B", "--client", "j", "--ttl", "5", "--"},                               // no command
		{"exec", "A", "B", "--shared-lock", "C", "--client", "j", "--ttl", "5", "--", "true"}, // C is not a lock
		{"exec", "A", "A", "--client", "j", "--ttl", "5", "--", "true"},                       // twice
	} {
		r := runCLI(t, bin, s.url, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, r.code, r.stderr)
		}
	}
	// Without --, the first argument is the lock and the rest the command.
	expect(t, bin, s.url, 0, "B C", "exec", "A", "--client", "j", "--ttl", "5", "echo", "B", "C")
}
