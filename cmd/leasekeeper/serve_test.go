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

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// validated is an HTTP client whose answers are checked against the
// OpenAPI document (internal/apitest).
func validated(t *testing.T) *http.Client {
	return &http.Client{Transport: apitest.New(t).Transport(t, nil)}
}

// postBody posts a JSON body to url and returns the answer's body, trimmed.
func postBody(t *testing.T, url, body string) string {
	t.Helper()
	got, err := postWith(validated(t), url, body)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// postWith posts a JSON body to url with hc and returns the answer's body,
// trimmed.
func postWith(hc *http.Client, url, body string) (string, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// TestServeGracefulShutdown: on SIGTERM a blocked acquire is answered with
// its state, the process exits 0, and the file reopens with everything the
// server acknowledged.
func TestServeGracefulShutdown(t *testing.T) {
	bin := buildBinary(t)
	db := filepath.Join(t.TempDir(), "serve.db")
	srv := startServe(t, bin, db)
	url := srv.URL()
	if got := postBody(t, url+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 3600}`); !strings.HasPrefix(got, `{"outcome":"granted","token":1,`) {
		t.Fatalf("acquire: %s", got)
	}
	if got := postBody(t, url+"/v1/write", `{"lock": "L", "key": "k", "value": "v1", "token": 1}`); got != `{"outcome":"ok"}` {
		t.Fatalf("write: %s", got)
	}
	blocked := make(chan string, 1)
	go func() {
		blocked <- postBody(t, url+"/v1/acquire", `{"client": "b", "lock": "L", "ttl": 10, "wait": 600}`)
	}()
	hc := validated(t)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := hc.Get(url + "/v1/status?client=b")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte(`"waiting":{"lock":"L","position":1}`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b never got queued")
		}
	}
	srv.Signal(syscall.SIGTERM)
	select {
	case got := <-blocked:
		if want := `{"outcome":"queued","position":1,"reason":"server_stopping"}`; got != want {
			t.Errorf("blocked acquire answered %s at shutdown, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked acquire was not answered at shutdown")
	}
	if code, err := srv.Wait(20 * time.Second); err != nil {
		t.Fatal("serve did not exit after SIGTERM")
	} else if code != 0 {
		t.Errorf("serve exited with status %d after SIGTERM, want 0", code)
	}
	svc := testutil.OpenDirect(t, db, service.Config{})
	ctx := context.Background()
	ts, _ := svc.Clock()
	if v, err := svc.Read(ctx, ts, lk.ReadRequest{Lock: "L", Key: "k"}); err != nil || v.Value == nil || *v.Value != "v1" || v.Token != 1 {
		t.Errorf("after restart read = %+v, %v; want v1 of token 1", v, err)
	}
	st, err := svc.Status(ctx, ts, lk.StatusRequest{Client: "b"})
	if err != nil || st.Waiting == nil || *st.Waiting != (lk.WaitingFor{Lock: "L", Position: 1}) {
		t.Errorf("after restart b's status = %+v, %v; want still waiting for L", st, err)
	}
}

// TestServeAuditLogAndMetrics: serve writes its audit log to --audit-log and
// serves /metrics.
func TestServeAuditLogAndMetrics(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	srv := startServe(t, bin, filepath.Join(dir, "serve.db"), "--audit-log", auditPath)
	if got := postBody(t, srv.URL()+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 60}`); !strings.HasPrefix(got, `{"outcome":"granted","token":1,`) {
		t.Fatalf("acquire: %s", got)
	}
	resp, err := validated(t).Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`leasekeeper_grants_total{source="immediate"} 1`)) {
		t.Errorf("/metrics lacks the grant:\n%s", metrics)
	}
	srv.Stop()
	audit, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(audit, []byte(`"msg":"grant","lock":"L","client":"a","mode":"exclusive","token":1`)) {
		t.Errorf("the audit log lacks the grant:\n%s", audit)
	}
}
