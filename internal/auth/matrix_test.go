package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// The tokens of the test's principals. None may ever appear in a log.
const (
	adminToken  = "adm-5f1c0e7a9b2d4c6e8f0a1b3c5d7e9f11"
	readerToken = "rdr-0a2b4c6d8e0f1a3b5c7d9e1f3a5b7c22"
	clientToken = "cli-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c33"
	wrongToken  = "bad-1111111111111111111111111111aa44"
)

func authFile() string {
	return `{"principals": [
	  {"name": "etl", "token_sha256": "` + auth.HashToken(clientToken) + `", "clients": ["etl-*"], "role": "client"},
	  {"name": "dash", "token_sha256": "` + auth.HashToken(readerToken) + `", "role": "reader"},
	  {"name": "ops", "token_sha256": "` + auth.HashToken(adminToken) + `", "role": "admin"}
	]}`
}

// syncBuffer is a log sink shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	url string
	log *syncBuffer
	hc  *http.Client // checks every answer against docs/openapi.json
}

// startServer is a real server on loopback over a SQLite file, with the
// test's auth file and a metrics handler, logging (at debug level) to a
// buffer.
func startServer(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	ps, err := auth.Parse([]byte(authFile()))
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "# metrics\n") })
	eng, err := engine.Open(ctx, filepath.Join(t.TempDir(), "x.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: auth.New(ps, log), Logger: log, Metrics: metrics})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		eng.Close()
	})
	return &env{url: hs.URL, log: buf, hc: &http.Client{Transport: apitest.New(t).Transport(t, nil)}}
}

// send makes one request with the Authorization header auth ("" for none)
// and returns the status and the body.
func (e *env) send(t *testing.T, authz, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// admin sends as the admin and insists on a 200.
func (e *env) admin(t *testing.T, method, path, body string) string {
	t.Helper()
	st, b := e.send(t, "Bearer "+adminToken, method, path, body)
	if st != http.StatusOK {
		t.Fatalf("setup %s %s %s: %d %s", method, path, body, st, b)
	}
	return b
}

// snapshot is everything a request about lock and client could change, as
// the admin sees it.
func (e *env) snapshot(t *testing.T, lock, client string) string {
	t.Helper()
	return strings.Join([]string{
		e.admin(t, "GET", "/v1/locks", ""),
		e.admin(t, "GET", "/v1/inspect?lock="+lock, ""),
		e.admin(t, "GET", "/v1/status?client="+client, ""),
		e.admin(t, "GET", "/v1/read?lock="+lock+"&key=k", ""),
	}, "\n")
}

// endpoint is one route of the API: how to prepare a request to it about a
// fresh lock and a client id, and what its success looks like.
type endpoint struct {
	op       string
	byClient bool // the request acts as, or asks about, a client id
	// prep sets the state up (as the admin) so that the request succeeds
	// when allowed.
	prep    func(t *testing.T, e *env, lock, client string)
	request func(lock, client string) (method, path, body string)
	success string // the prefix of a 200 body
}

func holding(t *testing.T, e *env, lock, client string) {
	e.admin(t, "POST", "/v1/acquire", fmt.Sprintf(`{"client": %q, "lock": %q, "ttl": 3600}`, client, lock))
}

func nothing(*testing.T, *env, string, string) {}

var endpoints = []endpoint{
	{"acquire", true, nothing, func(l, c string) (string, string, string) {
		return "POST", "/v1/acquire", fmt.Sprintf(`{"client": %q, "lock": %q, "ttl": 3600}`, c, l)
	}, `{"outcome":"granted","token":`},
	{"renew", true, holding, func(l, c string) (string, string, string) {
		return "POST", "/v1/renew", fmt.Sprintf(`{"client": %q, "lock": %q, "ttl": 60}`, c, l)
	}, `{"outcome":"renewed","token":`},
	{"release", true, holding, func(l, c string) (string, string, string) {
		return "POST", "/v1/release", fmt.Sprintf(`{"client": %q, "lock": %q}`, c, l)
	}, `{"outcome":"released"}`},
	{"revoke", true, holding, func(l, c string) (string, string, string) {
		return "POST", "/v1/revoke", fmt.Sprintf(`{"client": %q, "lock": %q}`, c, l)
	}, `{"outcome":"revoked"}`},
	{"unfence", false, nothing, func(l, c string) (string, string, string) {
		return "POST", "/v1/unfence", fmt.Sprintf(`{"lock": %q}`, l)
	}, `{"outcome":"ok","was":0,"highest":0}`},
	{"stale", true, holding, func(l, c string) (string, string, string) {
		return "POST", "/v1/stale", fmt.Sprintf(`{"client": %q, "lock": %q, "token": 1, "newer": 2, "resource": "r"}`, c, l)
	}, `{"outcome":"ok"}`},
	{"status", true, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/status?client=" + c, ""
	}, `{"client":"`},
	{"write", false, nothing, func(l, c string) (string, string, string) {
		return "POST", "/v1/write", fmt.Sprintf(`{"lock": %q, "key": "k", "value": "v", "token": 5}`, l)
	}, `{"outcome":"ok"}`},
	{"read", false, func(t *testing.T, e *env, l, c string) {
		e.admin(t, "POST", "/v1/write", fmt.Sprintf(`{"lock": %q, "key": "k", "value": "before", "token": 1}`, l))
	}, func(l, c string) (string, string, string) {
		return "GET", "/v1/read?lock=" + l + "&key=k", ""
	}, `{"value":"before","token":1}`},
	{"inspect", false, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/inspect?lock=" + l, ""
	}, `{"lock":"L`},
	{"locks", false, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/locks", ""
	}, `{"locks":[{`},
	{"history", true, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/history?client=" + c, ""
	}, `{"grants":[{`},
	{"history-of-lock", false, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/history?lock=" + l, ""
	}, `{"grants":`},
	{"store", false, func(t *testing.T, e *env, l, c string) {
		e.admin(t, "POST", "/v1/write", fmt.Sprintf(`{"lock": %q, "key": "k", "value": "v", "token": 1}`, l))
	}, func(l, c string) (string, string, string) {
		return "GET", "/v1/store?lock=" + l, ""
	}, `{"lock":"L`},
	{"graph", false, holding, func(l, c string) (string, string, string) {
		return "GET", "/v1/graph?lock=" + l, ""
	}, `{"locks":[{"lock":"L`},
	{"health", false, nothing, func(l, c string) (string, string, string) {
		return "GET", "/v1/health", ""
	}, `{"status":"ok","clock":`},
	{"ready", false, nothing, func(l, c string) (string, string, string) {
		return "GET", "/v1/ready", ""
	}, `{"status":"ready"}`},
	{"openapi", false, nothing, func(l, c string) (string, string, string) {
		return "GET", "/v1/openapi.json", ""
	}, `{`},
	{"metrics", false, nothing, func(l, c string) (string, string, string) {
		return "GET", "/metrics", ""
	}, `# metrics`},
}

// subject is who sends: a principal, or someone without a valid token.
type subject struct {
	name  string
	authz string    // the Authorization header
	role  auth.Role // "" when unauthenticated
}

var subjects = []subject{
	{"no token", "", ""},
	{"wrong token", "Bearer " + wrongToken, ""},
	{"basic auth", "Basic " + clientToken, ""},
	{"empty bearer", "Bearer ", ""},
	{"client", "Bearer " + clientToken, auth.RoleClient},
	{"reader", "Bearer " + readerToken, auth.RoleReader},
	{"admin", "Bearer " + adminToken, auth.RoleAdmin},
}

// want is the decision table of docs/security.md, written out.
func want(s subject, op, client string) int {
	if op == "health" || op == "ready" || op == "openapi" {
		return http.StatusOK
	}
	if s.role == "" {
		return http.StatusUnauthorized
	}
	ok := map[auth.Role]map[string]bool{
		auth.RoleClient: {"acquire": true, "renew": true, "release": true, "status": true, "write": true, "read": true,
			"history": true, "history-of-lock": true, "stale": true},
		auth.RoleReader: {"status": true, "read": true, "inspect": true, "locks": true, "metrics": true,
			"history": true, "history-of-lock": true, "store": true, "graph": true},
		auth.RoleAdmin: {"acquire": true, "renew": true, "release": true, "revoke": true, "unfence": true, "status": true, "stale": true,
			"write": true, "read": true, "inspect": true, "locks": true, "metrics": true,
			"history": true, "history-of-lock": true, "store": true, "graph": true},
	}[s.role][op]
	if ok && s.role == auth.RoleClient && client != "" && !strings.HasPrefix(client, "etl-") {
		ok = false
	}
	if !ok {
		return http.StatusForbidden
	}
	return http.StatusOK
}

// TestAuthorizationMatrix sends every endpoint as every role (and without a
// valid token), with a client id inside and outside the client principal's
// patterns: an allowed request succeeds, a refused one answers 401
// unauthenticated or 403 forbidden, with a message, and changes nothing.
func TestAuthorizationMatrix(t *testing.T) {
	e := startServer(t)
	// Refusals reach the log at a bounded rate (server.RefusalLogBurst,
	// then RefusalLogRate a second): the matrix below refuses far more
	// than a burst at once, so the two that checkLogs looks for go first.
	if st, _ := e.send(t, "Bearer "+clientToken, "POST", "/v1/revoke", `{"client":"etl-1","lock":"L0"}`); st != http.StatusForbidden {
		t.Errorf("revoke as etl: %d, want 403", st)
	}
	if st, _ := e.send(t, "", "GET", "/v1/locks", ""); st != http.StatusUnauthorized {
		t.Errorf("locks without a token: %d, want 401", st)
	}
	n := 0
	for _, s := range subjects {
		for _, ep := range endpoints {
			clients := []string{""}
			if ep.byClient {
				clients = []string{"etl-1", "web-1"}
			}
			for _, c := range clients {
				n++
				lock := fmt.Sprintf("L%d", n)
				id := c
				if id == "" {
					id = fmt.Sprintf("other-%d", n)
				}
				name := fmt.Sprintf("%s/%s", s.name, ep.op)
				if c != "" {
					name += "/" + c
				}
				t.Run(name, func(t *testing.T) {
					ep.prep(t, e, lock, id)
					before := e.snapshot(t, lock, id)
					method, path, body := ep.request(lock, id)
					status, got := e.send(t, s.authz, method, path, body)
					w := want(s, ep.op, c)
					if status != w {
						t.Fatalf("%s %s as %s: %d %s, want %d", method, path, s.name, status, got, w)
					}
					switch w {
					case http.StatusOK:
						if !strings.HasPrefix(got, ep.success) {
							t.Errorf("%s %s as %s: %s, want %s...", method, path, s.name, got, ep.success)
						}
					case http.StatusUnauthorized, http.StatusForbidden:
						code := map[int]lk.ErrorCode{401: lk.CodeUnauthenticated, 403: lk.CodeForbidden}[w]
						var obj map[string]any
						json.Unmarshal([]byte(got), &obj)
						if msg, _ := obj["message"].(string); len(obj) != 2 || obj["error"] != string(code) || msg == "" {
							t.Errorf("%s %s as %s: body %s, want {\"error\": %q, \"message\": ...}", method, path, s.name, got, code)
						}
						if after := e.snapshot(t, lock, id); after != before {
							t.Errorf("a refused %s changed the state:\nbefore %s\nafter  %s", ep.op, before, after)
						}
					}
				})
			}
		}
	}
	// The client's patterns are path.Match globs: '*' does not cross '/'.
	st, _ := e.send(t, "Bearer "+clientToken, "GET", "/v1/status?client=etl-a/b", "")
	if st != http.StatusForbidden {
		t.Errorf("status of etl-a/b as etl (pattern etl-*): %d, want 403", st)
	}
	// The scheme is case-insensitive; a second Authorization header is refused.
	if st, b := e.send(t, "bearer "+clientToken, "GET", "/v1/status?client=etl-a", ""); st != http.StatusOK {
		t.Errorf("lower-case bearer: %d %s", st, b)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/locks", nil)
	req.Header.Add("Authorization", "Bearer "+adminToken)
	req.Header.Add("Authorization", "Bearer "+readerToken)
	if resp, err := e.hc.Do(req); err != nil {
		t.Errorf("two Authorization headers: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("two Authorization headers: HTTP %d, want 401", resp.StatusCode)
		}
	}
	checkLogs(t, e.log.String(), "etl")
}

// checkLogs: refusals are logged by principal name, and no token ever
// appears.
func checkLogs(t *testing.T, logs, principal string) {
	t.Helper()
	for _, tok := range []string{adminToken, readerToken, clientToken, wrongToken} {
		for _, part := range []string{tok, tok[4:20], auth.HashToken(tok)} {
			if strings.Contains(logs, part) {
				t.Errorf("the log holds (part of) a token: %q", part)
			}
		}
	}
	if !strings.Contains(logs, "principal="+principal) || !strings.Contains(logs, "unauthenticated") {
		t.Errorf("the refusals were not logged by principal:\n%.2000s", logs)
	}
}

// TestGoClientAuth: the Go client's bearer token, its errors for 401 and 403,
// and revoke handing the lock over and fencing the revoked holder out.
func TestGoClientAuth(t *testing.T) {
	e := startServer(t)
	ctx := context.Background()
	hc := client.WithHTTPClient(e.hc)
	etl := client.New(e.url, client.WithBearerToken(clientToken), hc)
	ops := client.New(e.url, client.WithBearerToken(adminToken), hc)
	anon := client.New(e.url, hc)

	if _, err := anon.Locks(ctx, lk.LocksRequest{}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("locks without a token: %v, want ErrUnauthenticated", err)
	}
	if _, err := etl.Acquire(ctx, "L", client.AcquireOptions{Client: "web-1", TTL: 60e9}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("acquire as web-1 by etl: %v, want ErrForbidden", err)
	}
	lease, err := etl.Acquire(ctx, "L", client.AcquireOptions{Client: "etl-1", TTL: 60e9})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	if err := lease.Write(ctx, "k", "by etl-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := etl.Acquire(ctx, "L", client.AcquireOptions{Client: "etl-2", TTL: 60e9}); !errors.Is(err, client.ErrQueued) {
		t.Fatalf("etl-2 acquire: %v, want queued (and withdrawn)", err)
	}
	if res, err := etl.AcquireOnce(ctx, "L", client.AcquireOptions{Client: "etl-2", TTL: 60e9}); err != nil || res.Outcome != lk.Queued {
		t.Fatalf("etl-2 acquire once: %+v %v, want queued", res, err)
	}
	if _, err := etl.Revoke(ctx, "etl-1", "L"); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("revoke by a client principal: %v, want ErrForbidden", err)
	}
	if res, err := ops.Revoke(ctx, "etl-1", "L"); err != nil || res.Outcome != lk.Revoked {
		t.Fatalf("revoke by the admin: %+v %v", res, err)
	}
	if _, err := ops.Revoke(ctx, "etl-1", "L"); !errors.Is(err, client.ErrNotHolder) {
		t.Errorf("revoking again: %v, want ErrNotHolder", err)
	}
	st, err := ops.Inspect(ctx, "L")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Client != "etl-2" || st.Holders[0].Token <= lease.Token() {
		t.Fatalf("after revoke L is %+v (%v); want etl-2 holding with a higher token", st, err)
	}
	if _, err := etl.Write(ctx, "L", "k", "by etl-2", st.Holders[0].Token); err != nil {
		t.Fatal(err)
	}
	if err := lease.Write(ctx, "k", "late"); !errors.Is(err, client.ErrStaleToken) {
		t.Errorf("the revoked holder's write: %v, want ErrStaleToken", err)
	}
	if _, err := etl.Renew(ctx, "etl-1", "L", 60e9); !errors.Is(err, client.ErrNotHolder) {
		t.Errorf("the revoked holder's renew: %v, want ErrNotHolder", err)
	}
	checkLogs(t, e.log.String(), "etl")
}
