package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/service"
)

// TestServeStoreQuota: serve's quota flags reach the store, and the
// defaults are the documented ones.
func TestServeStoreQuota(t *testing.T) {
	cmd := newServeCmd()
	if got := storeQuota(cmd); got != (service.StoreQuota{MaxKeys: 1000, MaxBytes: 4194304, MaxTotal: 1 << 30}) {
		t.Errorf("default quota %+v, want 1,000 keys and 4,194,304 bytes per lock, 1 GiB in all (docs/operations.md)", got)
	}
	if err := cmd.ParseFlags([]string{"--store-max-keys=-1"}); err == nil {
		t.Error("--store-max-keys=-1 was accepted")
	}

	bin := buildBinary(t)
	// Without strict fencing, so that the writes need no lease first.
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "serve.db"), "--store-max-keys", "2", "--store-max-bytes", "0",
		"--strict-fencing=false")
	for i, want := range []string{`{"outcome":"ok"}`, `{"outcome":"ok"}`, `"error":"quota_exceeded"`, `{"outcome":"ok"}`} {
		key := []string{"a", "b", "c", "a"}[i]
		body := `{"lock": "L", "key": "` + key + `", "value": "` + strings.Repeat("v", 10000) + `", "token": 1}`
		if got := postBody(t, srv.URL()+"/v1/write", body); !strings.Contains(got, want) {
			t.Errorf("write %d (%s): %s, want %s", i, key, got, want)
		}
	}
}
