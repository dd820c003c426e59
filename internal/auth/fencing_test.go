package auth_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
	"github.com/leasekeeper/leasekeeper/service"
)

// startFencing starts a server on the database at path, with the test's
// auth file, strict fencing on or off, and its audit log written to audit.
// stop shuts it down, the database closed.
func startFencing(t *testing.T, path string, strict bool, audit *syncBuffer) (e *env, stop func()) {
	t.Helper()
	ps, err := auth.Parse([]byte(authFile()))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	var eng *engine.Engine
	tel := telemetry.New(audit, func(ctx context.Context) (service.Gauges, error) { return eng.Gauges(ctx) }, telemetry.Options{})
	eng, err = engine.Open(context.Background(), path, engine.Options{Rules: service.Config{StrictFencing: strict}, Observer: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: auth.New(ps, log), Logger: log, Observer: tel})
	hs := httptest.NewServer(srv.Handler())
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			hs.Close()

			tel.Flush()
			eng.Close()
		}
	}
	t.Cleanup(stop)
	return &env{url: hs.URL, hc: &http.Client{Transport: apitest.New(t).Transport(t, nil)}}, stop
}

// expectAnswer sends a request and checks its status and that its body
// starts with want.
func (e *env) expectAnswer(t *testing.T, token, method, path, body string, status int, want string) {
	t.Helper()
	st, got := e.send(t, "Bearer "+token, method, path, body)
	if st != status || !strings.HasPrefix(got, want) {
		t.Errorf("%s %s %s: %d %s; want %d %s...", method, path, body, st, got, status, want)
	}
}

// TestWritesBoundToGrants: under strict fencing, over HTTP with an auth
// file, on SQLite and PostgreSQL. A write with a token never issued for the
// lock, or on a lock never acquired, answers 409 token_not_granted and
// stores nothing; a client principal writes only with a token granted to
// one of its own client ids; the admin writes with any granted token. A
// lock fenced too high by a server without strict fencing refuses its
// holder's writes until the admin's unfence, which only an admin may send
// and which the audit log records with the admin's name.
func TestWritesBoundToGrants(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fencing.db")
			if backend == "postgres" {
				path = pgtest.DSN(t)
			}
			write := func(lock, key, value string, token string) string {
				return `{"lock": "` + lock + `", "key": "` + key + `", "value": "` + value + `", "token": ` + token + `}`
			}
			const notGranted = `{"error":"token_not_granted","message":`
			const maxToken = "9223372036854775807"

			// Fenced too high while strict fencing was off: L6 alone.
			audit := &syncBuffer{}
			loose, stop := startFencing(t, path, false, audit)
			loose.expectAnswer(t, adminToken, "POST", "/v1/acquire", `{"client": "etl-1", "lock": "F", "ttl": 3600}`, 200, `{"outcome":"granted","token":1,`)
			loose.expectAnswer(t, clientToken, "POST", "/v1/write", write("F", "k", "forged", maxToken), 200, `{"outcome":"ok"}`)
			loose.expectAnswer(t, clientToken, "POST", "/v1/write", write("F", "k", "honest", "1"), 409, `{"error":"stale_token"`)
			stop()

			e, _ := startFencing(t, path, true, audit)
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("N", "k", "v", "1"), 409,
				notGranted+`"no token was ever granted for N: acquire it first"}`)
			e.expectAnswer(t, adminToken, "POST", "/v1/write", write("N", "k", "v", maxToken), 409, notGranted)
			e.expectAnswer(t, adminToken, "GET", "/v1/read?lock=N&key=k", "", 200, `{"value":null}`)

			// Another principal's lease: its token is not etl's to write with.
			e.expectAnswer(t, adminToken, "POST", "/v1/acquire", `{"client": "web-1", "lock": "L", "ttl": 3600}`, 200, `{"outcome":"granted","token":1,`)
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("L", "k", "v", "1"), 409,
				notGranted+`"token 1 of L was granted to a client id this principal may not act as"}`)
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("L", "k", "v", "2"), 409,
				notGranted+`"token 2 was never granted for L: its last issued token is 1"}`)
			e.expectAnswer(t, adminToken, "GET", "/v1/read?lock=L&key=k", "", 200, `{"value":null}`)
			e.expectAnswer(t, adminToken, "POST", "/v1/write", write("L", "k", "web", "1"), 200, `{"outcome":"ok"}`)

			// etl's own lease.
			e.expectAnswer(t, clientToken, "POST", "/v1/acquire", `{"client": "etl-1", "lock": "M", "ttl": 3600}`, 200, `{"outcome":"granted","token":1,`)
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("M", "k", "etl", "1"), 200, `{"outcome":"ok"}`)

			// The lock fenced too high: its holder is refused as stale, the
			// forged token as never granted.
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("F", "k", "honest", "1"), 409, `{"error":"stale_token"`)
			e.expectAnswer(t, adminToken, "POST", "/v1/write", write("F", "k", "forged", maxToken), 409, notGranted)
			e.expectAnswer(t, clientToken, "POST", "/v1/unfence", `{"lock": "F"}`, 403, `{"error":"forbidden"`)
			e.expectAnswer(t, readerToken, "POST", "/v1/unfence", `{"lock": "F"}`, 403, `{"error":"forbidden"`)
			e.expectAnswer(t, adminToken, "POST", "/v1/unfence", `{"lock": "F"}`, 200, `{"outcome":"ok","was":`+maxToken+`,"highest":1}`)
			e.expectAnswer(t, clientToken, "POST", "/v1/write", write("F", "k", "honest", "1"), 200, `{"outcome":"ok"}`)
			e.expectAnswer(t, adminToken, "GET", "/v1/read?lock=F&key=k", "", 200, `{"value":"honest","token":1}`)
			// A sound lock: nothing to do, nothing audited.
			e.expectAnswer(t, adminToken, "POST", "/v1/unfence", `{"lock": "F"}`, 200, `{"outcome":"ok","was":1,"highest":1}`)
			e.expectAnswer(t, adminToken, "POST", "/v1/unfence", `{"lock": "nothing"}`, 200, `{"outcome":"ok","was":0,"highest":0}`)

			var unfences []map[string]any
			for _, line := range strings.Split(audit.String(), "\n") {
				var l map[string]any
				if json.Unmarshal([]byte(line), &l) == nil && l["msg"] == "unfence" {
					unfences = append(unfences, l)
				}
			}
			if len(unfences) != 1 || unfences[0]["lock"] != "F" || unfences[0]["was"] != 9223372036854775807.0 ||
				unfences[0]["highest"] != 1.0 || unfences[0]["principal"] != "ops" {
				t.Errorf("the audit log's unfence lines: %v; want one, of F from %s to 1 by ops\n%s", unfences, maxToken, audit.String())
			}
		})
	}
}
