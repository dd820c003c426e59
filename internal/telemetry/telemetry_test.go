package telemetry_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
	"github.com/leasekeeper/leasekeeper/service"
)

// lockedBuffer is the audit log's destination, read while the server runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// denyReads refuses reads, to see refusals counted and logged.
type denyReads struct{}

func (denyReads) Authorize(r *http.Request, a server.Access) *server.Denial {
	if a.Op == "read" {
		return &server.Denial{Code: lk.CodeUnauthenticated, Message: "reads are refused"}
	}
	return nil
}

// TestMetricsAndAudit drives a scripted workload through a real server and
// checks the counts /metrics shows and the audit lines, parsed.
func TestMetricsAndAudit(t *testing.T) {
	ctx := context.Background()
	audit := &lockedBuffer{}
	var eng *engine.Engine
	var err error
	tel := telemetry.New(audit, func(ctx context.Context) (service.Gauges, error) {
		return eng.Gauges(ctx)
	}, telemetry.Options{})
	clock := engine.NewManualClock(time.Unix(0, 0))
	eng, err = engine.Open(ctx, filepath.Join(t.TempDir(), "tel.db"), engine.Options{Clock: clock, Observer: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Observer: tel, Metrics: tel.Handler(), Authorizer: denyReads{}})
	hs := httptest.NewServer(srv.Handler())
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	// Every answer is checked against the API's OpenAPI document.
	hc := &http.Client{Transport: apitest.New(t).Transport(t, nil)}

	// call sends a request and returns the answer's body, which must have
	// the status want.
	call := func(want int, method, path, body string, header ...string) string {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s %s: HTTP %d %s, want %d", method, path, body, resp.StatusCode, b, want)
		}
		return strings.TrimSpace(string(b))
	}
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"a","lock":"L","ttl":10}`)                              // immediate grant
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"b","lock":"L","ttl":50}`)                              // queued
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"c","lock":"M","ttl":10}`)                              // immediate grant
	call(http.StatusOK, "POST", "/v1/renew", `{"client":"c","lock":"M","ttl":100}`)                               // renewal
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"e","lock":"M","ttl":10}`)                              // queued
	call(http.StatusOK, "POST", "/v1/release", `{"client":"e","lock":"M"}`)                                       // withdrawal
	call(http.StatusOK, "POST", "/v1/release", `{"client":"c","lock":"M"}`)                                       // release
	clock.Set(time.Unix(12, 0))                                                                                   // a lapses at 10, b is granted at 10
	call(http.StatusOK, "POST", "/v1/write", `{"lock":"L","key":"k","value":"v","token":2}`)                      // accepted
	call(http.StatusConflict, "POST", "/v1/write", `{"lock":"L","key":"k","value":"old","token":1}`)              // stale
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"x","lock":"X","ttl":100}`)                             // immediate grant
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"y","lock":"Y","ttl":100}`)                             // immediate grant
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"y","lock":"X","ttl":100}`)                             // queued
	call(http.StatusOK, "POST", "/v1/acquire", `{"client":"x","lock":"Y","ttl":100}`)                             // cycle: y (younger) aborted, Y passes to x from the queue
	call(http.StatusOK, "POST", "/v1/revoke", `{"client":"b","lock":"L"}`)                                        // revocation
	call(http.StatusOK, "POST", "/v1/stale", `{"client":"a","lock":"L","token":1,"newer":2,"resource":"orders"}`) // a fence refused a's token
	call(http.StatusUnauthorized, "GET", "/v1/read?lock=L&key=k", "", "Authorization", "Bearer s3cret-t0ken")     // refused

	metrics := call(http.StatusOK, "GET", "/metrics", "")
	for name, want := range map[string]string{
		`leasekeeper_grants_total{source="immediate"}`:  "4",
		`leasekeeper_grants_total{source="queue"}`:      "2",
		`leasekeeper_lapses_total`:                      "1",
		`leasekeeper_releases_total`:                    "1",
		`leasekeeper_withdrawals_total`:                 "1",
		`leasekeeper_renewals_total`:                    "1",
		`leasekeeper_revocations_total`:                 "1",
		`leasekeeper_deadlock_aborts_total`:             "1",
		`leasekeeper_stale_writes_total`:                "1",
		`leasekeeper_fence_stale_total`:                 "1",
		`leasekeeper_auth_failures_total{status="401"}`: "1",
		`leasekeeper_locks_held`:                        "2",
		`leasekeeper_waiters`:                           "0",
	} {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(metrics)
		if m == nil || m[1] != want {
			t.Errorf("%s = %v, want %s", name, m, want)
		}
	}
	for _, h := range []string{`leasekeeper_request_duration_seconds_count{code="200",op="acquire"}`,
		`leasekeeper_commit_duration_seconds_count`} {
		if !strings.Contains(metrics, h) {
			t.Errorf("/metrics lacks %s", h)
		}
	}

	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(audit.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	find := func(msg string, fields map[string]any) {
		t.Helper()
		for _, l := range lines {
			if l["msg"] != msg {
				continue
			}
			ok := true
			for k, v := range fields {
				g, _ := json.Marshal(l[k])
				w, _ := json.Marshal(v)
				ok = ok && bytes.Equal(g, w)
			}
			if ok {
				return
			}
		}
		t.Errorf("no audit line %s %v in:\n%s", msg, fields, audit.String())
	}
	find("grant", map[string]any{"lock": "L", "client": "a", "token": 1, "at": 0, "source": "immediate"})
	find("lapse", map[string]any{"lock": "L", "holder": "a", "token": 1, "at": 10})
	find("grant", map[string]any{"lock": "L", "client": "b", "token": 2, "at": 10, "expires_at": 60, "source": "queue"})
	find("withdraw", map[string]any{"lock": "M", "client": "e"})
	find("release", map[string]any{"lock": "M", "client": "c"})
	find("stale_write", map[string]any{"lock": "L", "token": 1, "highest": 2})
	find("deadlock_abort", map[string]any{"client": "y", "cycle": []string{"x", "y"}})
	find("revoke", map[string]any{"lock": "L", "client": "b"})
	find("fence_stale", map[string]any{"lock": "L", "client": "a", "token": 1, "newer": 2, "resource": "orders"})
	find("auth_failure", map[string]any{"op": "read", "status": 401, "code": "unauthenticated"})
	if strings.Contains(audit.String(), "s3cret") || strings.Contains(metrics, "s3cret") {
		t.Error("the bearer token reached the audit log or the metrics")
	}
}
