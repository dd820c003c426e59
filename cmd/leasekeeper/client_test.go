package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestClientCLI builds the binary once and runs the client commands and exec
// against real servers on loopback, each on a SQLite file of its own.
func TestClientCLI(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, bin string)
	}{
		{"commands", testCLICommands},
		{"usage-and-unreachable", testCLIUsage},
		{"exec-env", testExecEnv},
		{"exec-keepalive", testExecKeepAlive},
		{"exec-lost", testExecLost},
		{"exec-status", testExecStatus},
		{"exec-not-obtained", testExecNotObtained},
		{"exec-signal", testExecSignal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, bin)
		})
	}
}

// cliServer is a real server on loopback over a SQLite file.
type cliServer struct {
	url string
	*client.Client
}

func startCLIServer(t *testing.T) *cliServer {
	t.Helper()
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(svc, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		svc.Close()
	})
	return &cliServer{url: hs.URL, Client: client.New(hs.URL)}
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// cliCommand is the binary with args, talking to url through the environment.
func cliCommand(ctx context.Context, bin, url string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_SERVER="+url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// runCLI runs the binary to its end, within 20 seconds.
func runCLI(t *testing.T, bin, url string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd, stdout, stderr := cliCommand(ctx, bin, url, args...)
	err := cmd.Run()
	return cliResult{stdout.String(), stderr.String(), exitCode(err)}
}

// expect runs a command and checks its exit status and its stdout: exactly
// want, or, for a want ending in "...", a stdout that starts with the rest.
func expect(t *testing.T, bin, url string, code int, want string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, bin, url, args...)
	out := strings.TrimSuffix(r.stdout, "\n")
	ok := out == want
	if prefix, cut := strings.CutSuffix(want, "..."); cut {
		ok = strings.HasPrefix(out, prefix)
	}
	if r.code != code || !ok {
		t.Errorf("leasekeeper %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q",
			strings.Join(args, " "), r.code, r.stdout, r.stderr, code, want)
	}
	return r
}

func testCLICommands(t *testing.T, bin string) {
	s := startCLIServer(t)
	u := s.url
	r := expect(t, bin, u, 0, `["granted",1,...`, "acquire", "exports/daily", "--client", "etl-a", "--ttl", "30")
	var granted []any
	if err := json.Unmarshal([]byte(r.stdout), &granted); err != nil || len(granted) != 3 {
		t.Fatalf("acquire printed %q: %v", r.stdout, err)
	}
	expires := int64(granted[2].(float64))
	if now := time.Now().Unix(); expires < now+29 || expires > now+30 {
		t.Errorf("expires_at %d, want 30s from %d", expires, now)
	}
	expect(t, bin, u, 1, `"error: client busy"`, "acquire", "exports/daily", "--client", "etl-a", "--ttl", "30")
	expect(t, bin, u, 75, `["queued",1]`, "acquire", "exports/daily", "--client", "etl-b", "--ttl", "30", "--shared")
	expect(t, bin, u, 0, `["renewed",1,...`, "renew", "exports/daily", "--client", "etl-a", "--ttl", "60")
	expect(t, bin, u, 1, `"error: not holder"`, "renew", "exports/daily", "--client", "etl-b", "--ttl", "60")
	expect(t, bin, u, 1, `"error: invalid ttl"`, "renew", "exports/daily", "--client", "etl-a", "--ttl", "0")
	r = expect(t, bin, u, 0, `{"holders":[["etl-a","exclusive",1,...`, "inspect", "exports/daily")
	var st struct {
		Holders [][]any
		Queue   [][]any
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Queue) != 1 || st.Queue[0][0] != "etl-b" || st.Queue[0][1] != "shared" {
		t.Errorf("inspect printed %q (%v); want etl-b shared in the queue", r.stdout, err)
	}
	expect(t, bin, u, 0, `{"holders":[],"queue":[]}`, "inspect", "nothing")
	expect(t, bin, u, 0, `{"age":2,"holds":[],"waiting":"exports/daily"}`, "status", "etl-b")
	expect(t, bin, u, 0, `{"age":null,"holds":[],"waiting":null}`, "status", "nobody")
	expect(t, bin, u, 0, `[{"holders":[["etl-a","exclusive",1,...`, "locks")
	expect(t, bin, u, 0, `"ok"`, "write", "exports/daily", "part-1", "rows 1-100", "--token", "1")
	expect(t, bin, u, 0, `"ok"`, "write", "exports/daily", "part-1", "rows 1-120", "--token", "2")
	expect(t, bin, u, 1, `"error: stale token"`, "write", "exports/daily", "part-1", "late", "--token", "1")
	expect(t, bin, u, 0, `"rows 1-120"`, "read", "exports/daily", "part-1")
	expect(t, bin, u, 0, `null`, "read", "exports/daily", "part-2")
	expect(t, bin, u, 0, `"withdrawn"`, "release", "exports/daily", "--client", "etl-b")
	expect(t, bin, u, 0, `"released"`, "release", "exports/daily", "--client", "etl-a")
	r = expect(t, bin, u, 1, `"error: not holder"`, "release", "exports/daily", "--client", "etl-a")
	if !strings.Contains(r.stderr, "not holder") {
		t.Errorf("stderr %q, want the error", r.stderr)
	}
	expect(t, bin, u, 0, `[]`, "locks")
	expect(t, bin, u, 1, `"error: invalid arguments: lock is longer than 256 bytes"`,
		"inspect", strings.Repeat("x", 257))

	// --wait: granted when the holder releases meanwhile.
	expect(t, bin, u, 0, `["granted",1,...`, "acquire", "L", "--client", "a", "--ttl", "30")
	go func() {
		time.Sleep(500 * time.Millisecond)
		s.Release(context.Background(), "a", "L")
	}()
	expect(t, bin, u, 0, `["granted",2,...`, "acquire", "L", "--client", "b", "--ttl", "30", "--wait", "10")
	// --wait running out: still queued, and left queued as the API says.
	expect(t, bin, u, 75, `["queued",1]`, "acquire", "L", "--client", "c", "--ttl", "30", "--wait", "1")
	expect(t, bin, u, 0, `{"age":5,"holds":[],"waiting":"L"}`, "status", "c")
}

func testCLIUsage(t *testing.T, bin string) {
	s := startCLIServer(t)
	for _, args := range [][]string{
		{"acquire", "L", "--client", "a"},               // no --ttl
		{"acquire", "L", "--ttl", "5"},                  // no --client
		{"acquire", "--client", "a", "--ttl", "5"},      // no lock
		{"acquire", "L", "--client", "a", "--ttl", "x"}, // not a number
		{"release", "L", "M", "--client", "a"},
		{"write", "L", "k", "v"}, // no --token
		{"read", "L"},
		{"inspect", "L", "--bogus"},
		{"exec", "L", "--client", "a", "--ttl", "5"},                    // no command
		{"exec", "L", "M", "--client", "a", "--ttl", "5", "--", "true"}, // two args before --
		{"exec", "L", "--client", "a", "--ttl", "5", "--grace", "-1", "--", "true"},
	} {
		if r := runCLI(t, bin, s.url, args...); r.code != 2 || r.stdout != "" || r.stderr == "" {
			t.Errorf("leasekeeper %s: exit %d, stdout %q, stderr %q; want a usage error (2)", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// Nothing listens on port 1.
	for _, args := range [][]string{
		{"inspect", "L"},
		{"acquire", "L", "--client", "a", "--ttl", "5"},
		{"exec", "L", "--client", "a", "--ttl", "5", "--", "true"},
	} {
		if r := runCLI(t, bin, "http://127.0.0.1:1", args...); r.code != 3 || r.stdout != "" || !strings.Contains(r.stderr, "no answer") {
			t.Errorf("leasekeeper %s, server unreachable: exit %d, stdout %q, stderr %q; want 3", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	// --server wins over the environment.
	expect(t, bin, "http://127.0.0.1:1", 0, `{"holders":[],"queue":[]}`, "inspect", "L", "--server", s.url)
}

// holds reports whether client holds lock, as the server says.
func holds(s *cliServer, client, lock string) bool {
	cs, err := s.Status(context.Background(), client)
	if err != nil {
		return false
	}
	for _, h := range cs.Holds {
		if h.Lock == lock {
			return true
		}
	}
	return false
}
