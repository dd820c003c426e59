package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// readmeCommands returns README.md's indented command lines (a code block
// of four spaces), with their line numbers.
func readmeCommands(t *testing.T) (lines []string, numbers []int) {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if line, ok := strings.CutPrefix(sc.Text(), "    "); ok && !strings.HasPrefix(line, " ") {
			lines = append(lines, line)
			numbers = append(numbers, n)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines, numbers
}

// TestReadmePath: the README says how to put leasekeeper on the PATH
// before its first example that calls it by name (a new user following it
// met "leasekeeper: not found", exit 127).
func TestReadmePath(t *testing.T) {
	const install = "go install ./cmd/leasekeeper"
	lines, numbers := readmeCommands(t)
	installed := false
	for i, line := range lines {
		switch {
		case line == install:
			installed = true
		case strings.HasPrefix(line, "leasekeeper ") && !installed:
			t.Errorf("README.md:%d calls leasekeeper by name before the README says %q: %s", numbers[i], install, line)
		}
	}
	if !installed {
		t.Errorf("README.md never says %q", install)
	}
}

// TestReadmeExec runs the README's exec example as it is written, from the
// repository root, with leasekeeper on the PATH and LEASEKEEPER_SERVER
// naming a server where another client holds the lock for 2 seconds: exec
// waits for that lease to lapse, then examples/nightly-export.sh writes its
// parts with the token exec hands it.
func TestReadmeExec(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	var example string
	lines, _ := readmeCommands(t)
	for _, line := range lines {
		if strings.HasPrefix(line, "leasekeeper exec ") {
			example = line
		}
	}
	if example == "" {
		t.Fatal("README.md has no leasekeeper exec example")
	}
	s := startExplainingCLIServer(t) // as serve: grants say how their predecessors ended
	first, err := s.Client.AcquireOnce(context.Background(), "exports/daily", client.AcquireOptions{Client: "etl-a", TTL: 2 * time.Second})
	if err != nil || first.Outcome != lk.Granted {
		t.Fatalf("acquire: %+v, %v", first, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", example)
	cmd.Dir = testutil.RepoRoot(t)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LEASEKEEPER_SERVER="+s.url)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("$ %s\n%v\nstandard output:\n%s\nstandard error:\n%s", example, err, stdout.String(), stderr.String())
	}
	if n := strings.Count(stdout.String(), "exported part-"); n != 3 {
		t.Errorf("$ %s\nprinted %d parts, want 3:\n%s", example, n, stdout.String())
	}
	if !strings.Contains(stderr.String(), "did not release the lock (its lease was lapsed)") {
		t.Errorf("$ %s\nthe job did not say that its predecessor's lease lapsed; standard error:\n%s", example, stderr.String())
	}
	r := runCLI(t, bin, s.url, "read", "exports/daily", "part-3")
	var got lk.ReadResult
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Value == nil || *got.Value != "rows 201-300" || got.Token != first.Token+1 {
		t.Errorf("leasekeeper read exports/daily part-3 after the job: %q, %q; want rows 201-300 with token %d", r.stdout, r.stderr, first.Token+1)
	}
}
