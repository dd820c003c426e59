package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeStrictFencing: serve fences strictly unless told not to; a lock
// fenced too high while it was not is repaired by `leasekeeper unfence`,
// which the audit log records.
func TestServeStrictFencing(t *testing.T) {
	if !strictFencing(newServeCmd()) {
		t.Error("--strict-fencing is off by default")
	}
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--strict-fencing=false"}); err != nil || strictFencing(cmd) {
		t.Errorf("--strict-fencing=false: %v, strict %v", err, strictFencing(cmd))
	}

	bin := buildBinary(t)
	dir := t.TempDir()
	db, audit := filepath.Join(dir, "fencing.db"), filepath.Join(dir, "audit.log")
	const forged = `{"lock": "L", "key": "k", "value": "forged", "token": 9223372036854775807}`
	srv := startServe(t, bin, db, "--audit-log", audit)
	if got := postBody(t, srv.URL()+"/v1/write", forged); got != `{"error":"token_not_granted","message":"no token was ever granted for L: acquire it first"}` {
		t.Errorf("a write on a lock never acquired, by default: %s", got)
	}
	srv.Stop()

	srv = startServe(t, bin, db, "--audit-log", audit, "--strict-fencing=false")
	if got := postBody(t, srv.URL()+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 3600}`); !strings.HasPrefix(got, `{"outcome":"granted","token":1,`) {
		t.Fatalf("acquire: %s", got)
	}
	if got := postBody(t, srv.URL()+"/v1/write", forged); got != `{"outcome":"ok"}` {
		t.Fatalf("a forged token without strict fencing (L6): %s", got)
	}
	const honest = `{"lock": "L", "key": "k", "value": "honest", "token": 1}`
	if got := postBody(t, srv.URL()+"/v1/write", honest); !strings.HasPrefix(got, `{"error":"stale_token"`) {
		t.Fatalf("the holder's write on the fenced lock: %s", got)
	}
	expect(t, bin, srv.URL(), 0, `{"outcome":"ok","was":9223372036854775807,"highest":1}`, "unfence", "L")
	if got := postBody(t, srv.URL()+"/v1/write", honest); got != `{"outcome":"ok"}` {
		t.Errorf("the holder's write after unfence: %s", got)
	}
	expect(t, bin, srv.URL(), 0, `{"outcome":"ok","was":1,"highest":1}`, "unfence", "L")
	expect(t, bin, srv.URL(), 2, "", "unfence")
	srv.Stop()

	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `"msg":"unfence","lock":"L","was":9223372036854775807,"highest":1,"at":`); n != 1 {
		t.Errorf("the audit log holds %d lines of the unfence that changed L's fence, want 1:\n%s", n, b)
	}
	if n := strings.Count(string(b), `"msg":"unfence"`); n != 1 {
		t.Errorf("the audit log holds %d unfence lines, want 1 (a no-op unfence is not one):\n%s", n, b)
	}
}
