package client

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestBearerAndTLS: the token goes out in the Authorization header, and the
// TLS configuration applies whichever http.Client is in use and whatever the
// order of the options.
func TestBearerAndTLS(t *testing.T) {
	var got string
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"locks":[],"next":null}`)
	}))
	defer hs.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}), 0o600)
	cfg, err := LoadCAFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, opts := range map[string][]Option{
		"tls only":         {WithTLSConfig(cfg), WithBearerToken("t0k")},
		"http client then": {WithHTTPClient(&http.Client{Timeout: time.Minute}), WithTLSConfig(cfg), WithBearerToken("t0k")},
		"then http client": {WithTLSConfig(cfg), WithHTTPClient(&http.Client{Timeout: time.Minute}), WithBearerToken("t0k")},
	} {
		got = ""
		if _, err := New(hs.URL, opts...).Locks(ctx, lk.LocksRequest{}); err != nil || got != "Bearer t0k" {
			t.Errorf("%s: %v, Authorization %q", name, err, got)
		}
	}
	if _, err := New(hs.URL).Locks(ctx, lk.LocksRequest{}); err == nil {
		t.Error("the system roots trusted the test server's certificate")
	}
	got = "unset"
	New(hs.URL, WithTLSConfig(&tls.Config{RootCAs: cfg.RootCAs})).Locks(ctx, lk.LocksRequest{})
	if got != "" {
		t.Errorf("without WithBearerToken, Authorization %q", got)
	}
	if _, err := LoadCAFile(filepath.Join(t.TempDir(), "missing.pem")); err == nil {
		t.Error("LoadCAFile of a missing file succeeded")
	}
	os.WriteFile(caFile, []byte("not pem"), 0o600)
	if _, err := LoadCAFile(caFile); !errors.Is(err, errNoCertificates) {
		t.Errorf("LoadCAFile of a file without certificates: %v", err)
	}
}
