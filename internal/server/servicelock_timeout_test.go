package server_test

import (
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
)

// TestServiceLockTimeout: while something else holds the service row on
// PostgreSQL (a peer whose connection is slow, or a psql session), a write
// is answered 503 once repo.ServiceLockTimeout has passed, not at the
// clients' 10 s timeout, and the 503 is true: the operation was not done.
func TestServiceLockTimeout(t *testing.T) {
	dsn := pgtest.DSN(t)
	f, _ := startServer(t, dsn, 1000)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 100})

	unblock := blockWriters(t, dsn)
	start := time.Now()
	status, v := f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "M", "ttl": 100})
	took := time.Since(start)
	unblock()
	if status != 503 {
		t.Fatalf("acquire while the service row is held: %d %v, want 503", status, v)
	}
	// The margin is for a loaded machine; the old lock timeout was 10 s.
	if took < repo.ServiceLockTimeout-100*time.Millisecond || took > repo.ServiceLockTimeout+3*time.Second {
		t.Errorf("answered 503 after %v, want about %v", took, repo.ServiceLockTimeout)
	}
	_, v = f.call("GET", "/v1/inspect?lock=M", nil)
	expect(t, v, `{"lock": "M", "holders": [], "queue": [], "holder_count": 0, "queue_length": 0}`)
	_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "M", "ttl": 100})
	if m, _ := v.(map[string]any); m["outcome"] != "granted" {
		t.Errorf("acquire once the row is free: %v", v)
	}
}
