package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// launchServe runs `leasekeeper serve` on db and returns its base URL.
func launchServe(t *testing.T, bin, db string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--db", db, "--listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case u := <-addr:
		return cmd, u
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not say where it listens")
		return nil, ""
	}
}

func postBody(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}

// TestServeGracefulShutdown: on SIGTERM a blocked acquire is answered with
// its state, the process exits 0, and the file reopens with everything the
// server acknowledged.
func TestServeGracefulShutdown(t *testing.T) {
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	cmd, url := launchServe(t, bin, db)
	if got := postBody(t, url+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 3600}`); !strings.HasPrefix(got, `["granted",1,`) {
		t.Fatalf("acquire: %s", got)
	}
	if got := postBody(t, url+"/v1/write", `{"lock": "L", "key": "k", "value": "v1", "token": 1}`); got != `"ok"` {
		t.Fatalf("write: %s", got)
	}
	blocked := make(chan string, 1)
	go func() {
		blocked <- postBody(t, url+"/v1/acquire", `{"client": "b", "lock": "L", "ttl": 10, "wait": 600}`)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(url + "/v1/status?client=b")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte(`"waiting":"L"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never got queued")
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case got := <-blocked:
		if got != `["queued",1]` {
			t.Errorf("blocked acquire answered %s at shutdown, want [\"queued\",1]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked acquire was not answered at shutdown")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	svc := testutil.OpenService(t, db)
	ctx := context.Background()
	ts, _ := svc.Clock()
	if v, found, err := svc.Read(ctx, ts, "L", "k"); err != nil || !found || v != "v1" {
		t.Errorf("after restart read = %q, %v, %v; want v1", v, found, err)
	}
	st, err := svc.Status(ctx, ts, "b")
	if err != nil || st.Waiting != "L" {
		t.Errorf("after restart b's status = %+v, %v; want still waiting for L", st, err)
	}
}
