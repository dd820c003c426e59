//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBin runs the built binary with args and stdin, and returns its combined
// output and exit status. A command still running after 20 s is killed and
// reported, with status -1: a server that should have refused to start.
func runBin(t *testing.T, bin, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Errorf("leasekeeper %s still ran after 20 s", strings.Join(args, " "))
		return string(out), -1
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("leasekeeper %s: %v", strings.Join(args, " "), err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestServeOneServerPerFile: a second serve on a served SQLite file refuses
// to start, naming the file and the first server's pid, and so does one
// on a hard link of it, and run --db; sqlite3 and backup read the file meanwhile, run --db on another
// file is unaffected; the files are private (0600); once the first server
// stops, the file serves again and the start-up line carries the file, its
// clock, its locks and the highest token.
func TestServeOneServerPerFile(t *testing.T) {
	old := syscall.Umask(0o022) // the servers inherit it
	t.Cleanup(func() { syscall.Umask(old) })
	bin := buildBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "one.db")
	srv := startServe(t, bin, db)
	for _, body := range []string{
		`{"client": "a", "lock": "L", "ttl": 3600}`,
		`{"client": "b", "lock": "M", "ttl": 3600}`,
	} {
		if got := postBody(t, srv.URL()+"/v1/acquire", body); !strings.HasPrefix(got, `{"outcome":"granted","token":1,`) {
			t.Fatalf("acquire %s: %s", body, got)
		}
	}
	if got := postBody(t, srv.URL()+"/v1/release", `{"client": "b", "lock": "M"}`); got != `{"outcome":"released"}` {
		t.Fatalf("release: %s", got)
	}
	last := postBody(t, srv.URL()+"/v1/acquire", `{"client": "b", "lock": "M", "ttl": 3600}`)
	var lastGrant struct {
		Token     int64 `json:"token"`
		GrantedAt int64 `json:"granted_at"`
	}
	if err := json.Unmarshal([]byte(last), &lastGrant); err != nil || lastGrant.Token != 2 {
		t.Fatalf("acquire M again: %s", last)
	}
	pid := fmt.Sprintf("pid %d", srv.Pid())

	out, code := runBin(t, bin, "", "serve", "--db", db, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(out, db) || !strings.Contains(out, pid) {
		t.Errorf("a second serve on %s exited %d, want non-zero with the file and %s:\n%s", db, code, pid, out)
	}
	// The same file under another name, in another folder: the lock file
	// beside it is another, the file is not (issue 20).
	hard := filepath.Join(t.TempDir(), "h2.db")
	if err := os.Link(db, hard); err != nil {
		t.Fatal(err)
	}
	out, code = runBin(t, bin, "", "serve", "--db", hard, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(out, hard) || !strings.Contains(out, pid) || !strings.Contains(out, "hard link") {
		t.Errorf("serve on %s, a hard link of the served %s, exited %d, want non-zero with the file, %s and \"hard link\":\n%s", hard, db, code, pid, out)
	}
	out, code = runBin(t, bin, `[["acquire", 0, "c", "N", 30]]`, "run", "--db", db)
	if code == 0 || !strings.Contains(out, db) || !strings.Contains(out, pid) {
		t.Errorf("run --db on the served file exited %d, want non-zero with the file and %s:\n%s", code, pid, out)
	}
	out, code = runBin(t, bin, `[["acquire", 0, "c", "N", 30]]`, "run", "--db", filepath.Join(dir, "other.db"))
	if code != 0 || !strings.Contains(out, `["granted",1,30]`) {
		t.Errorf("run --db on another file exited %d:\n%s", code, out)
	}

	if sqlite3, err := exec.LookPath("sqlite3"); err != nil {
		msg := "sqlite3 is not on PATH (apt-get install sqlite3): the reader beside a server is not tried"
		if os.Getenv("CI") != "" {
			t.Error(msg + "; CI never skips it")
		} else {
			t.Log("skipping part: " + msg)
		}
	} else if b, err := exec.Command(sqlite3, db, "SELECT count(*) FROM leases").CombinedOutput(); err != nil || strings.TrimSpace(string(b)) != "2" {
		t.Errorf("sqlite3 beside the server: %v\n%s", err, b)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if out, code := runBin(t, bin, "", "backup", "--db", db, copyPath); code != 0 {
		t.Errorf("backup beside the server exited %d:\n%s", code, out)
	}
	for _, name := range []string{db, db + "-wal", db + "-shm", copyPath} {
		if st, err := os.Stat(name); err != nil {
			t.Errorf("%s: %v", filepath.Base(name), err)
		} else if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %04o under umask 022, want 0600", filepath.Base(name), m)
		}
	}

	srv.Stop()
	srv.Start()
	line := regexp.MustCompile(`(?m)^.*"msg":"database".*$`).FindString(srv.Log())
	want := regexp.MustCompile(`^\{"time":"\S+","level":"INFO","msg":"database","file":` + regexp.QuoteMeta(strconv.Quote(db)) +
		`,"clock":(\d+),"clock_utc":"\S+Z","locks":2,"highest_token":2\}$`)
	if m := want.FindStringSubmatch(line); m == nil {
		t.Errorf("the start-up line is %q, want it to match %s; the log:\n%s", line, want, srv.Log())
	} else if clock, _ := strconv.ParseInt(m[1], 10, 64); clock < lastGrant.GrantedAt {
		t.Errorf("the start-up line says clock=%d, before the last grant at %d", clock, lastGrant.GrantedAt)
	}
}

// TestServeStartErrors: a server that cannot open its database says which
// file and why, instead of SQLite's bare "unable to open database file
// (14)" or "file is not a database (26)".
func TestServeStartErrors(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	notDB := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(notDB, []byte(strings.Repeat(`{"msg":"grant","lock":"L"}`+"\n", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ db, cause string }{
		{filepath.Join(dir, "missing", "x.db"), "the folder " + filepath.Join(dir, "missing") + " does not exist"},
		{notDB, "it is not a SQLite database"},
	} {
		out, code := runBin(t, bin, "", "serve", "--db", c.db, "--listen", "127.0.0.1:0")
		if code == 0 || !strings.Contains(out, "open "+c.db+": ") || !strings.Contains(out, c.cause) {
			t.Errorf("serve --db %s exited %d, want non-zero naming the file and saying %q:\n%s", c.db, code, c.cause, out)
		}
	}
}
