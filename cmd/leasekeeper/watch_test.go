package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// TestWatchCLI: watch prints one JSON line per event its flags select, as
// they are committed, and exits 0 when interrupted; a bad filter is an error
// result.
func TestWatchCLI(t *testing.T) {
	bin := buildBinary(t)
	s := startCLIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd, _, stderr := cliCommand(ctx, bin, s.url, "watch", "--prefix", "jobs/")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// watch is listening once a grant made after it started shows.
	first := ""
	for i := 0; first == ""; i++ {
		if i == 100 {
			t.Fatalf("watch printed nothing; stderr %q", stderr.String())
		}
		s.AcquireOnce(ctx, fmt.Sprint("jobs/warm-", i), client.AcquireOptions{Client: "warm", TTL: time.Minute})
		select {
		case first = <-lines:
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.AcquireOnce(ctx, "elsewhere", client.AcquireOptions{Client: "a", TTL: time.Minute})
	s.AcquireOnce(ctx, "jobs/x", client.AcquireOptions{Client: "a", TTL: time.Minute})
	var got lk.Event
	for got.Lock != "jobs/x" {
		select {
		case line := <-lines:
			if err := json.Unmarshal([]byte(line), &got); err != nil || !strings.HasPrefix(line, `{"id":`) {
				t.Fatalf("watch printed %q: %v", line, err)
			}
			if !strings.HasPrefix(got.Lock, "jobs/") {
				t.Fatalf("watch --prefix jobs/ printed %q", line)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch did not print the grant of jobs/x")
		}
	}
	if got.Kind != lk.EventGrant || *got.Client != "a" || got.Token != 1 {
		t.Errorf("watch printed %+v, want a's grant of jobs/x", got)
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); exitCode(err) != 0 {
		t.Errorf("watch interrupted: %v, stderr %q", err, stderr.String())
	}

	expect(t, bin, s.url, exitErrorResult, `{"error":"invalid_arguments","message":"lock is longer than 256 bytes"}`,
		"watch", "--lock", strings.Repeat("x", 300))
}

// TestWatchFlagErrors: an empty filter, which would watch everything, and
// a negative --after, which would start from now, are usage errors (2),
// refused before any request.
func TestWatchFlagErrors(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"--lock", ""}, {"--prefix", ""}, {"--client", ""}, {"--after", "-5"}, {"--after", "-1"},
	} {
		// No server listens there: a command that got past its flags would
		// block reconnecting, not exit 2.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cmd, stdout, stderr := cliCommand(ctx, bin, "http://127.0.0.1:1", append([]string{"watch"}, args...)...)
		err := cmd.Run()
		cancel()
		r := cliResult{stdout.String(), stderr.String(), exitCode(err)}
		if r.code != 2 || !strings.Contains(r.stderr, args[0]) || r.stdout != "" {
			t.Errorf("watch %q: exit %d, stdout %q, stderr %q; want exit 2 naming %s", args, r.code, r.stdout, r.stderr, args[0])
		}
	}
}
