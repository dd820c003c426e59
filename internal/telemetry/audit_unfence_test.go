package telemetry_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// TestAuditRecoverUnfence: the unfence line of a group killed before its
// COMMIT is cancelled at the next start (the fence is where it was); that
// of a committed unfence stands.
func TestAuditRecoverUnfence(t *testing.T) {
	dir := t.TempDir()
	dbPath, logPath := filepath.Join(dir, "u.db"), filepath.Join(dir, "audit.jsonl")
	run := func(ops func(a *auditServer)) string {
		t.Helper()
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		a := startAudit(t, dbPath, f, engine.NewManualClock(time.Unix(100, 0)), nil)
		if ops != nil {
			ops(a)
		}
		a.stop()
		f.Close()
		b, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	run(func(a *auditServer) {
		a.ok("POST", "/v1/acquire", `{"client":"a","lock":"L","ttl":1000}`, "")
		a.ok("POST", "/v1/write", `{"lock":"L","key":"k","value":"forged","token":9223372036854775807}`, "") // no strict fencing
	})
	// A kill between the write of an unfence's line and its COMMIT.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"unfence","lock":"L","was":9223372036854775807,"highest":1,"at":100,"group":9}`+"\n")
	f.Close()

	log := run(func(a *auditServer) {
		if got := a.ok("POST", "/v1/unfence", `{"lock":"L"}`, ""); got != `{"outcome":"ok","was":9223372036854775807,"highest":1}` {
			t.Errorf("unfence: %s", got)
		}
	})
	if !strings.Contains(log, `"msg":"not_committed","group":9`) {
		t.Errorf("the uncommitted unfence's group was not cancelled:\n%s", log)
	}
	// This run's unfence committed: the next start leaves it be.
	log = run(nil)
	if n := strings.Count(log, `"msg":"not_committed"`); n != 1 {
		t.Errorf("%d not_committed lines, want the one of group 9:\n%s", n, log)
	}
	if !strings.Contains(log, `"msg":"unfence","lock":"L","was":9223372036854775807,"highest":1,"at":100,"group":1}`) {
		t.Errorf("no unfence line of the committed unfence:\n%s", log)
	}
}
