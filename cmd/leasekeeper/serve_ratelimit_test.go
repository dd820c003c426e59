package main

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/auth"
)

// TestServeRateLimits: serve reads the limits of its auth file. A malformed
// one stops it at start, exit 2, naming the principal and the field; a
// principal over its rate is answered 429 rate_limited with Retry-After,
// counted in /metrics by principal.
func TestServeRateLimits(t *testing.T) {
	const etlToken, opsToken = "etl-rl-7d2c4e6a8b0f1d3c5e7a9b1d3f5a7c99", "ops-rl-1a3c5e7b9d0f2a4c6e8b0d2f4a6c8e11"
	bin := buildBinary(t)
	dir := t.TempDir()
	file := func(limits string) string {
		name := filepath.Join(dir, strconv.Itoa(len(limits))+".json")
		writeFile(t, name, `{"principals": [
		  {"name": "etl", "token_sha256": "`+auth.HashToken(etlToken)+`", "clients": ["etl-*"], "role": "client"`+limits+`},
		  {"name": "ops", "token_sha256": "`+auth.HashToken(opsToken)+`", "role": "admin"}
		]}`)
		return name
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	out, err := exec.CommandContext(ctx, bin, "serve", "--db", filepath.Join(dir, "never.db"), "--auth-file", file(`, "rate": 2.5`)).CombinedOutput()
	cancel()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), `principal 1 ("etl"): "rate" must be an integer from 1 to 1000000`) {
		t.Errorf("serve with a rate of 2.5: exit %d, output %q; want 2 and the principal and field named", code, out)
	}

	srv := startServe(t, bin, filepath.Join(dir, "rl.db"), "--auth-file", file(`, "rate": 3, "max_waiting": 1`))
	hc := validated(t)
	get := func(token, path string) (int, string, string) {
		req, _ := http.NewRequest("GET", srv.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	var mu sync.Mutex
	limited := 0
	var wg sync.WaitGroup
	for range 15 {
		wg.Go(func() {
			status, retry, body := get(etlToken, "/v1/status?client=etl-a")
			switch {
			case status == http.StatusOK:
			case status == http.StatusTooManyRequests && retry != "" && retry != "0" && strings.Contains(body, `"error":"rate_limited"`):
				mu.Lock()
				limited++
				mu.Unlock()
			default:
				t.Errorf("HTTP %d Retry-After %q %s", status, retry, body)
			}
		})
	}
	wg.Wait()
	if limited == 0 {
		t.Fatal("15 requests at once at a rate of 3: none refused")
	}
	_, _, metrics := get(opsToken, "/metrics")
	if want := `leasekeeper_rate_limited_total{principal="etl"} ` + strconv.Itoa(limited); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q", want)
	}
}
