package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExecQueuedWithdrawUnconfirmed: exec still queued when its wait ran out
// withdraws; when no withdraw is ever confirmed (here a server that answers
// every release 503), the client may stay queued, and exec says so with
// status 3, not 75, which promises the request was withdrawn. A protocol
// test: the fake server answers as the API does, but never releases.
func TestExecQueuedWithdrawUnconfirmed(t *testing.T) {
	bin := buildBinary(t)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/acquire":
			io.WriteString(w, `{"outcome":"queued","position":1}`+"\n")
		case "/v1/status":
			io.WriteString(w, `{"client":"etl-a","age":1,"holds":[],"waiting":{"lock":"ew","position":1},"next":null}`+"\n")
		default:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"unavailable","message":"the database is unavailable"}`+"\n")
		}
	}))
	defer fake.Close()
	r := runCLI(t, bin, fake.URL, "exec", "ew", "--client", "etl-a", "--ttl", "1", "--wait", "1", "--", "echo", "RAN")
	if r.code != exitNoAnswer || strings.Contains(r.stdout, "RAN") {
		t.Errorf("exec: exit %d, stdout %q, stderr %q; want exit %d without running the command", r.code, r.stdout, r.stderr, exitNoAnswer)
	}
	if !strings.Contains(r.stderr, "may still be queued") {
		t.Errorf("stderr %q does not say the request may still be queued", r.stderr)
	}
}
