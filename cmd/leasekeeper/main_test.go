package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
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
	svc := testutil.OpenDirect(t, db, service.Config{})
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

// TestBinaryOnPostgres: run --db and --check with a postgres:// URL, the
// final state read back with SQL, the database then refused for a second
// replay, and backup refused with the way to back it up instead; messages
// never show the URL's password.
func TestBinaryOnPostgres(t *testing.T) {
	bin := buildBinary(t)
	root := testutil.RepoRoot(t)
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw") // trust auth ignores it
	withPassword := u.String()
	caseFile := filepath.Join(root, "testdata", "golden", "example-inc-5127-replay.json")
	if out, err := exec.Command(bin, "run", "--check", "--db", withPassword, caseFile).CombinedOutput(); err != nil {
		t.Fatalf("run --check on PostgreSQL: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var holder string
	var token int64
	if err := conn.QueryRow(ctx, `SELECT client, token FROM leases WHERE lock = 'exports/daily'`).Scan(&holder, &token); err != nil {
		t.Fatal(err)
	}
	if holder != "etl-c" || token != 3 {
		t.Errorf("leases holds %s with token %d, want etl-c with 3", holder, token)
	}
	out, err := exec.Command(bin, "run", "--db", withPassword, caseFile).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "already holds leasekeeper state") {
		t.Errorf("reusing the database: exit %d, output %q", code, out)
	}
	if strings.Contains(string(out), "s3cret-pw") {
		t.Errorf("the message shows the password: %q", out)
	}
	out, err = exec.Command(bin, "backup", "--db", withPassword, filepath.Join(t.TempDir(), "copy.db")).CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "pg_dump") {
		t.Errorf("backup of PostgreSQL: exit %d, output %q", code, out)
	}
}

// TestVersionOneAnswer: `leasekeeper version` and `leasekeeper --version`
// print the same line.
func TestVersionOneAnswer(t *testing.T) {
	var answers []string
	for _, args := range [][]string{{"version"}, {"--version"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("leasekeeper %s: %v", strings.Join(args, " "), err)
		}
		answers = append(answers, out.String())
	}
	if want := versionLine() + "\n"; answers[0] != want || answers[1] != want {
		t.Errorf("version printed %q, --version %q; want both %q", answers[0], answers[1], want)
	}
}

// TestRunCheckVerdict: run --check says on standard error that the results
// match, one line, on standard output the results alone; a difference says
// nothing of a match.
func TestRunCheckVerdict(t *testing.T) {
	run := func(args ...string) (stdout, stderr string, err error) {
		root := newRoot()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"run"}, args...))
		err = root.Execute()
		return out.String(), errOut.String(), err
	}
	caseFile := filepath.Join(testutil.RepoRoot(t), "testdata", "golden", "example-inc-5127-replay.json")
	b, err := os.ReadFile(caseFile)
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Want []json.RawMessage }
	if err := json.Unmarshal(b, &c); err != nil || len(c.Want) < 2 {
		t.Fatalf("%s: want %d results, %v", caseFile, len(c.Want), err)
	}
	stdout, stderr, err := run("--check", caseFile)
	if want := fmt.Sprintf("%d results match the file's want\n", len(c.Want)); err != nil || stderr != want {
		t.Errorf("run --check of a passing case: %v, standard error %q; want %q", err, stderr, want)
	}
	if _, derr := harness.Decode(strings.NewReader(stdout)); derr != nil {
		t.Errorf("run --check printed on standard output what is not the results: %v\n%s", derr, stdout)
	}
	if _, stderr, _ := run(caseFile); stderr != "" {
		t.Errorf("run without --check wrote to standard error: %q", stderr)
	}

	one := filepath.Join(t.TempDir(), "one.json")
	os.WriteFile(one, []byte(`{"ops": [["status", 0, "x"]], "want": [{"age": null, "holds": [], "waiting": null}]}`), 0o644)
	if _, stderr, err := run("--check", one); err != nil || stderr != "1 result matches the file's want\n" {
		t.Errorf("run --check of a passing one-operation case: %v, standard error %q", err, stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"ops": [["status", 0, "x"]], "want": ["nope"]}`), 0o644)
	if _, stderr, err := run("--check", bad); err == nil || strings.Contains(stderr, "match") {
		t.Errorf("run --check of a failing case: %v, standard error %q", err, stderr)
	}
}
