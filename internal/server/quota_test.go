package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestWriteQuota: over the fenced store's quota a write answers 409
// quota_exceeded, as docs/api.md and docs/openapi.json say, and stores
// nothing.
func TestWriteQuota(t *testing.T) {
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "q.db"), engine.Options{Rules: service.Config{Quota: service.StoreQuota{MaxKeys: 2, MaxBytes: 100}}, Clock: engine.NewManualClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := server.New(eng, server.Options{})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer eng.Drain()
	hc := validated(t)
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := hc.Post(hs.URL+"/v1/write", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %q", body, raw)
		}
		return resp.StatusCode, v
	}
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"lock":"L","key":"a","value":"1","token":1}`, 200, ""},
		{`{"lock":"L","key":"b","value":"2","token":1}`, 200, ""},
		{`{"lock":"L","key":"c","value":"3","token":1}`, http.StatusConflict, "quota_exceeded"},
		{`{"lock":"L","key":"a","value":"` + strings.Repeat("x", 99) + `","token":1}`, http.StatusConflict, "quota_exceeded"},
		{`{"lock":"L","key":"a","value":"overwritten","token":1}`, 200, ""},
	} {
		status, v := post(c.body)
		if status != c.status || (c.code != "" && v["error"] != c.code) {
			t.Errorf("%s: %d %v, want %d %s", c.body, status, v, c.status, c.code)
		}
	}
	resp, err := hc.Get(hs.URL + "/v1/read?lock=L&key=c")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := strings.TrimSpace(string(raw)); got != `{"value":null}` {
		t.Errorf("read of the refused key: %s", got)
	}
}
