package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
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
		{"pretty", testCLIPretty},
		{"locks-pages", testCLILocksPages},
		{"status-pages", testCLIStatusPages},
		{"exec-env", testExecEnv},
		{"exec-predecessor", testExecPredecessor},
		{"exec-keepalive", testExecKeepAlive},
		{"exec-lost", testExecLost},
		{"exec-status", testExecStatus},
		{"exec-not-obtained", testExecNotObtained},
		{"exec-signal", testExecSignal},
		{"exec-several-env", testExecSeveralEnv},
		{"exec-several-wait", testExecSeveralWait},
		{"exec-several-aborted", testExecSeveralAborted},
		{"exec-several-lost", testExecSeveralLost},
		{"exec-several-usage", testExecSeveralUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, bin)
		})
	}
}

// cliServer is a real server on loopback over a SQLite file. Its Client
// checks every answer against the OpenAPI document (internal/apitest); the
// binary's requests cannot be checked so.
type cliServer struct {
	url string
	*client.Client
}

func startCLIServer(t *testing.T) *cliServer {
	t.Helper()
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "leasekeeper.db"), engine.Options{})
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
	r := expect(t, bin, u, 0, `{"outcome":"granted","token":1,"granted_at":...`, "acquire", "exports/daily", "--client", "etl-a", "--ttl", "30")
	var granted lk.AcquireResult
	if err := json.Unmarshal([]byte(r.stdout), &granted); err != nil || granted.Outcome != lk.Granted || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("acquire printed %q: %v", r.stdout, err)
	}
	if now := time.Now().Unix(); granted.ExpiresAt < now+29 || granted.ExpiresAt > now+30 || granted.ExpiresAt != granted.GrantedAt+30 {
		t.Errorf("granted at %d, expiring at %d; want 30s from %d", granted.GrantedAt, granted.ExpiresAt, now)
	}
	expect(t, bin, u, 1, `{"error":"client_busy","message":"etl-a already holds exports/daily"}`,
		"acquire", "exports/daily", "--client", "etl-a", "--ttl", "30")
	expect(t, bin, u, 75, `{"outcome":"queued","position":1}`, "acquire", "exports/daily", "--client", "etl-b", "--ttl", "30", "--shared")
	r = expect(t, bin, u, 0, fmt.Sprintf(`{"outcome":"renewed","token":1,"granted_at":%d,"expires_at":...`, granted.GrantedAt),
		"renew", "exports/daily", "--client", "etl-a", "--ttl", "60")
	var renewed lk.RenewResult
	if err := json.Unmarshal([]byte(r.stdout), &renewed); err != nil || renewed.ExpiresAt < granted.ExpiresAt+29 {
		t.Errorf("renew printed %q: %v; want 60s from now", r.stdout, err)
	}
	expect(t, bin, u, 1, `{"error":"not_holder","message":"etl-b holds no live lease on exports/daily"}`,
		"renew", "exports/daily", "--client", "etl-b", "--ttl", "60")
	expect(t, bin, u, 1, `{"error":"invalid_ttl","message":"ttl must be from 1 to 86400 seconds, got 0"}`,
		"renew", "exports/daily", "--client", "etl-a", "--ttl", "0")
	expect(t, bin, u, 0, fmt.Sprintf(`{"lock":"exports/daily","holders":[{"client":"etl-a","mode":"exclusive","token":1,"expires_at":%d}],`+
		`"queue":[{"client":"etl-b","mode":"shared","position":1}],"holder_count":1,"queue_length":1}`, renewed.ExpiresAt), "inspect", "exports/daily")
	expect(t, bin, u, 0, `{"lock":"nothing","holders":[],"queue":[],"holder_count":0,"queue_length":0}`, "inspect", "nothing")
	expect(t, bin, u, 0, `{"client":"etl-b","age":2,"holds":[],"waiting":{"lock":"exports/daily","position":1},"next":null}`, "status", "etl-b")
	expect(t, bin, u, 0, fmt.Sprintf(`{"client":"etl-a","age":1,"holds":[{"lock":"exports/daily","mode":"exclusive","token":1,"expires_at":%d}],"waiting":null,"next":null}`,
		renewed.ExpiresAt), "status", "etl-a")
	expect(t, bin, u, 0, `{"client":"nobody","age":null,"holds":[],"waiting":null,"next":null}`, "status", "nobody")
	// oldest_wait_s is etl-b's wait so far: 0 or 1 s by now.
	expect(t, bin, u, 0, fmt.Sprintf(`{"lock":"exports/daily","holders":[{"client":"etl-a","mode":"exclusive","token":1,"expires_at":%d}],"holder_count":1,"waiting":1,"oldest_wait_s":...`,
		renewed.ExpiresAt), "locks")
	expect(t, bin, u, 0, `{"outcome":"ok"}`, "write", "exports/daily", "part-1", "rows 1-100", "--token", "1")
	expect(t, bin, u, 0, `{"outcome":"ok"}`, "write", "exports/daily", "part-1", "rows 1-120", "--token", "2")
	expect(t, bin, u, 1, `{"error":"stale_token","message":"token 1 is lower than 2, the highest accepted for exports/daily"}`,
		"write", "exports/daily", "part-1", "late", "--token", "1")
	expect(t, bin, u, 0, `{"value":"rows 1-120","token":2}`, "read", "exports/daily", "part-1")
	expect(t, bin, u, 0, `{"value":null}`, "read", "exports/daily", "part-2")
	expect(t, bin, u, 0, `{"outcome":"withdrawn"}`, "release", "exports/daily", "--client", "etl-b")
	expect(t, bin, u, 0, `{"outcome":"released"}`, "release", "exports/daily", "--client", "etl-a")
	r = expect(t, bin, u, 1, `{"error":"not_holder","message":"etl-a neither holds a live lease on exports/daily nor waits for it"}`,
		"release", "exports/daily", "--client", "etl-a")
	if !strings.Contains(r.stderr, "not holder") {
		t.Errorf("stderr %q, want the error", r.stderr)
	}
	expect(t, bin, u, 0, ``, "locks")
	expect(t, bin, u, 1, `{"error":"invalid_arguments","message":"lock is longer than 256 bytes"}`,
		"inspect", strings.Repeat("x", 257))

	// --wait: granted when the holder releases meanwhile.
	expect(t, bin, u, 0, `{"outcome":"granted","token":1,...`, "acquire", "L", "--client", "a", "--ttl", "30")
	go func() {
		time.Sleep(500 * time.Millisecond)
		s.Release(context.Background(), "a", "L")
	}()
	expect(t, bin, u, 0, `{"outcome":"granted","token":2,...`, "acquire", "L", "--client", "b", "--ttl", "30", "--wait", "10")
	// --wait running out: still queued, and left queued as the API says.
	expect(t, bin, u, 75, `{"outcome":"queued","position":1}`, "acquire", "L", "--client", "c", "--ttl", "30", "--wait", "1")
	expect(t, bin, u, 0, `{"client":"c","age":5,"holds":[],"waiting":{"lock":"L","position":1},"next":null}`, "status", "c")
}

// --pretty indents the same JSON objects, error objects and the lines of
// locks included; without it every answer is one line.
func testCLIPretty(t *testing.T, bin string) {
	s := startCLIServer(t)
	u := s.url
	expect(t, bin, u, 0, `{
  "client": "nobody",
  "age": null,
  "holds": [],
  "waiting": null,
  "next": null
}`, "status", "nobody", "--pretty")
	r := expect(t, bin, u, 0, `{
  "outcome": "granted",
  "token": 1,
  "granted_at": ...`, "acquire", "L", "--client", "a", "--ttl", "30", "--pretty")
	var g lk.AcquireResult
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil || g.Outcome != lk.Granted || g.Token != 1 {
		t.Fatalf("acquire --pretty printed %q: %v", r.stdout, err)
	}
	expect(t, bin, u, 0, fmt.Sprintf(`{
  "lock": "L",
  "holders": [
    {
      "client": "a",
      "mode": "exclusive",
      "token": 1,
      "expires_at": %d
    }
  ],
  "queue": [],
  "holder_count": 1,
  "queue_length": 0
}`, g.ExpiresAt), "inspect", "L", "--pretty")
	expect(t, bin, u, 1, `{
  "error": "client_busy",
  "message": "a already holds L"
}`, "acquire", "L", "--client", "a", "--ttl", "30", "--pretty")
	expect(t, bin, u, 75, `{
  "outcome": "queued",
  "position": 1
}`, "acquire", "L", "--client", "b", "--ttl", "30", "--pretty")
	if _, err := s.AcquireOnce(context.Background(), "M", client.AcquireOptions{Client: "c", TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// locks --pretty: the objects of locks, each indented.
	plain := runCLI(t, bin, u, "locks")
	pretty := runCLI(t, bin, u, "locks", "--pretty")
	if plain.code != 0 || pretty.code != 0 || strings.Count(plain.stdout, "\n") != 2 {
		t.Fatalf("locks: exit %d, stdout %q; --pretty: exit %d, stdout %q", plain.code, plain.stdout, pretty.code, pretty.stdout)
	}
	// The two runs are apart in time: a wait's age, which may have crossed
	// a second between them, is taken from the pretty run.
	var want strings.Builder
	var ages []*int64
	for d := json.NewDecoder(strings.NewReader(pretty.stdout)); d.More(); {
		var l lk.LockSummary
		if err := d.Decode(&l); err != nil {
			t.Fatalf("locks --pretty printed %q: %v", pretty.stdout, err)
		}
		ages = append(ages, l.OldestWaitS)
	}
	for i, line := range strings.Split(strings.TrimSuffix(plain.stdout, "\n"), "\n") {
		var l lk.LockSummary
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("locks printed %q: %v", line, err)
		}
		if i < len(ages) && l.OldestWaitS != nil && ages[i] != nil {
			l.OldestWaitS = ages[i]
		}
		b, _ := json.MarshalIndent(l, "", "  ")
		want.Write(append(b, '\n'))
	}
	if pretty.stdout != want.String() || !strings.HasPrefix(pretty.stdout, "{\n  \"lock\": \"L\",\n") {
		t.Errorf("locks --pretty printed %q, want %q", pretty.stdout, want.String())
	}
}

// locks follows the server's pages: more than a page of locks prints one
// line each, every lock once, by name; --prefix lists those that start
// with it.
func testCLILocksPages(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx := context.Background()
	var names []string
	for i := range 2*lk.DefaultLocksLimit + 30 {
		names = append(names, fmt.Sprintf("jobs/%04d", i))
	}
	names = append(names, "other/a", "other/b")
	for i, n := range names {
		if res, err := s.AcquireOnce(ctx, n, client.AcquireOptions{Client: fmt.Sprintf("c%d", i), TTL: 120 * time.Second}); err != nil || res.Outcome != lk.Granted {
			t.Fatalf("acquire %s: %+v, %v", n, res, err)
		}
	}
	if res, err := s.AcquireOnce(ctx, "other/b", client.AcquireOptions{Client: "waiter", TTL: 120 * time.Second}); err != nil || res.Outcome != lk.Queued {
		t.Fatalf("waiter queues for other/b: %+v, %v", res, err)
	}
	lines := func(args ...string) []lk.LockSummary {
		t.Helper()
		r := runCLI(t, bin, s.url, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("leasekeeper %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		var out []lk.LockSummary
		for _, line := range strings.SplitAfter(r.stdout, "\n") {
			if line == "" {
				continue
			}
			var l lk.LockSummary
			if err := json.Unmarshal([]byte(line), &l); err != nil || !strings.HasSuffix(line, "}\n") {
				t.Fatalf("leasekeeper %s printed the line %q: %v", strings.Join(args, " "), line, err)
			}
			out = append(out, l)
		}
		return out
	}
	check := func(got []lk.LockSummary, want []string, args string) {
		t.Helper()
		var gotNames []string
		for _, l := range got {
			gotNames = append(gotNames, l.Lock)
		}
		if strings.Join(gotNames, " ") != strings.Join(want, " ") {
			t.Errorf("leasekeeper %s printed %d locks %v; want the %d %v, each once, in name order", args, len(gotNames), gotNames, len(want), want)
		}
	}
	all := lines("locks")
	check(all, names, "locks")
	for i, l := range all {
		if i >= len(names) {
			break
		}
		want := 0
		if l.Lock == "other/b" {
			want = 1
		}
		if len(l.Holders) != 1 || l.Holders[0].Client != fmt.Sprintf("c%d", i) || l.Holders[0].Token != 1 || l.Waiting != int64(want) {
			t.Errorf("line %d: %+v; want c%d holding token 1, %d waiting", i, l, i, want)
		}
	}
	check(lines("locks", "--prefix", "jobs/"), names[:len(names)-2], "locks --prefix jobs/")
	check(lines("locks", "--prefix", "other/"), []string{"other/a", "other/b"}, "locks --prefix other/")
	check(lines("locks", "--prefix", "jobs/01"), names[100:200], "locks --prefix jobs/01")
	check(lines("locks", "--prefix", "nothing/"), nil, "locks --prefix nothing/")
	if r := runCLI(t, bin, s.url, "locks", "extra"); r.code != 2 || r.stdout != "" {
		t.Errorf("locks with an argument: exit %d, stdout %q; want 2", r.code, r.stdout)
	}
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
		{"exec", "L", "--client", "a", "--ttl", "5"},          // no command
		{"exec", "--client", "a", "--ttl", "5", "--", "true"}, // no lock before --
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
	expect(t, bin, "http://127.0.0.1:1", 0, `{"lock":"L","holders":[],"queue":[],"holder_count":0,"queue_length":0}`, "inspect", "L", "--server", s.url)
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
