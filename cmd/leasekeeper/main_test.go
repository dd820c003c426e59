package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// buildBinary builds leasekeeper once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasekeeper")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryGolden replays every golden case through the built binary, fed on
// standard input as a plain array of operations, and compares stdout.
func TestBinaryGolden(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range testutil.GoldenCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			in, _ := json.Marshal(c.Ops)
			cmd := exec.Command(bin, "run")
			cmd.Stdin = bytes.NewReader(in)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("leasekeeper run: %v\n%s", err, stderr.String())
			}
			got, err := harness.Decode(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("stdout is not a JSON array: %v\n%s", err, out)
			}
			if d := harness.Diff(c.Ops, c.Want, got.Ops); d != "" {
				t.Errorf("%s\n%s", c.Path, d)
			}
		})
	}
}

// TestBinaryCheckAndDB runs a case file with --check into a --db file, reads
// the final lock table back with SQL, and refuses to reuse the file.
func TestBinaryCheckAndDB(t *testing.T) {
	bin := buildBinary(t)
	root := testutil.RepoRoot(t)
	db := filepath.Join(t.TempDir(), "run.db")
	caseFile := filepath.Join(root, "testdata", "golden", "example-inc-5127-replay.json")
	if out, err := exec.Command(bin, "run", "--check", "--db", db, caseFile).CombinedOutput(); err != nil {
		t.Fatalf("run --check: %v\n%s", err, out)
	}
	svc := testutil.OpenService(t, db)
	if ts, ok := svc.Clock(); !ok || ts != 56 {
		t.Errorf("clock in the file = %d, %v; want 56", ts, ok)
	}
	svc.Close()
	out, err := exec.Command(bin, "run", "--db", db, caseFile).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "already holds leasekeeper state") {
		t.Errorf("reusing a --db file: exit %d, output %q", code, out)
	}
}

// TestBinaryBadInput: what is not an array of operations gets a message on
// stderr, nothing on stdout, and exit status 2.
func TestBinaryBadInput(t *testing.T) {
	bin := buildBinary(t)
	for _, in := range []string{"", "{", `{"a": 1}`, `"ops"`, "42", "[] []", `{"ops": 3}`, "[1,]"} {
		cmd := exec.Command(bin, "run")
		cmd.Stdin = strings.NewReader(in)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if code := exitCode(err); code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "not a JSON array") {
			t.Errorf("input %q: exit %d, stdout %q, stderr %q", in, code, stdout.String(), stderr.String())
		}
	}
	if err := exec.Command(bin, "run", filepath.Join(t.TempDir(), "missing.json")).Run(); exitCode(err) != 2 {
		t.Errorf("missing file: exit %d, want 2", exitCode(err))
	}
	bad := filepath.Join(t.TempDir(), "case.json")
	os.WriteFile(bad, []byte(`{"ops": [["status", 0, "x"]], "want": ["nope"]}`), 0o644)
	if err := exec.Command(bin, "run", "--check", bad).Run(); exitCode(err) != 1 {
		t.Errorf("--check with a wrong want: exit %d, want 1", exitCode(err))
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
