package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

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
	srv := startCrashServer(t, bin, db)
	url := srv.base
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
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case got := <-blocked:
		if got != `["queued",1]` {
			t.Errorf("blocked acquire answered %s at shutdown, want [\"queued\",1]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked acquire was not answered at shutdown")
	}
	select {
	case <-srv.exited:
		if code := srv.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("serve exited with status %d after SIGTERM, want 0", code)
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

// TestServeAuditLogAndMetrics: serve writes its audit log to --audit-log and
// serves /metrics.
func TestServeAuditLogAndMetrics(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	srv := startCrashServer(t, bin, filepath.Join(dir, "serve.db"), "--audit-log", auditPath)
	if got := postBody(t, srv.base+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 60}`); !strings.HasPrefix(got, `["granted",1,`) {
		t.Fatalf("acquire: %s", got)
	}
	resp, err := http.Get(srv.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`leasekeeper_grants_total{source="immediate"} 1`)) {
		t.Errorf("/metrics lacks the grant:\n%s", metrics)
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	<-srv.exited
	audit, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(audit, []byte(`"msg":"grant","lock":"L","client":"a","token":1`)) {
		t.Errorf("the audit log lacks the grant:\n%s", audit)
	}
}
