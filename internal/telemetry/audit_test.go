package telemetry_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// auditServer is a server with telemetry on svc, its audit log going to
// audit, served over loopback.
type auditServer struct {
	t    *testing.T
	eng  *engine.Engine
	stop func() // drains the engine, stops the server, closes the database
	tel  *telemetry.Telemetry
	base string
	hc   *http.Client
}

func startAudit(t *testing.T, path string, audit io.Writer, clock engine.Clock, authz server.Authorizer) *auditServer {
	t.Helper()
	a := &auditServer{t: t}
	a.tel = telemetry.New(audit, nil, telemetry.Options{Principals: authz != nil})
	srv := testutil.StartServer(t, path, engine.Options{Clock: clock, Observer: a.tel},
		server.Options{Observer: a.tel, Metrics: a.tel.Handler(), Authorizer: authz})
	a.eng, a.stop, a.base = srv.Engine, srv.Stop, srv.URL
	a.hc = &http.Client{Transport: apitest.New(t).Transport(t, nil)}
	return a
}

// call sends a request, with a bearer token when token is not "", and
// returns the status and body.
func (a *auditServer) call(method, path, body, token string) (int, string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func (a *auditServer) ok(method, path, body, token string) string {
	a.t.Helper()
	status, b := a.call(method, path, body, token)
	if status != http.StatusOK {
		a.t.Fatalf("%s %s %s: %d %s", method, path, body, status, b)
	}
	return b
}

// auditLines parses an audit log.
func auditLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

// subset reports whether line has every field of want, with equal JSON.
func subset(line, want map[string]any) bool {
	for k, v := range want {
		g, _ := json.Marshal(line[k])
		w, _ := json.Marshal(v)
		var norm any // as the line was read: objects with their keys sorted
		json.Unmarshal(w, &norm)
		w, _ = json.Marshal(norm)
		if !bytes.Equal(g, w) {
			return false
		}
	}
	return true
}

// probeWriter is an audit log that, at each write, reads the database
// through a connection of its own: what a kill of the server at that
// instant would leave committed.
type probeWriter struct {
	t          *testing.T
	db         *sql.DB
	mu         sync.Mutex
	b          bytes.Buffer
	violations []string
}

func (p *probeWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, raw := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var l struct {
			Msg, Lock, Client string
			Token             int64
		}
		if json.Unmarshal(raw, &l) != nil {
			continue
		}
		var n int
		switch l.Msg {
		case "grant", "release":
			if err := p.db.QueryRow(`SELECT count(*) FROM leases WHERE lock = ? AND client = ? AND token = ?`,
				l.Lock, l.Client, l.Token).Scan(&n); err != nil {
				p.t.Errorf("probe: %v", err)
			}
		default:
			continue
		}
		// Before its transaction commits, a grant's lease is not in the
		// database yet, and a released lease still is.
		if (l.Msg == "grant") != (n == 0) {
			p.violations = append(p.violations, fmt.Sprintf("%s: the database already shows it committed", raw))
		}
	}
	return p.b.Write(b)
}

// TestAuditWrittenBeforeCommit: each transaction's audit lines are out of
// the process before the transaction commits, so that no kill, at any
// instant, leaves a committed grant or release without its line. (Written
// after the commit, as they were, a kill during the commit's sync lost
// them: SQLite has the transaction in its WAL, committed for a restart,
// before the sync returns.)
func TestAuditWrittenBeforeCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ahead.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	probe := &probeWriter{t: t, db: db}
	a := startAudit(t, path, probe, nil, nil)
	a.ok("POST", "/v1/acquire", `{"client":"a","lock":"L","ttl":100}`, "")
	a.ok("POST", "/v1/acquire", `{"client":"b","lock":"L","ttl":100,"mode":"exclusive"}`, "")
	a.ok("POST", "/v1/release", `{"client":"a","lock":"L"}`, "") // and b granted from the queue
	a.ok("POST", "/v1/release", `{"client":"b","lock":"L"}`, "")

	probe.mu.Lock()
	defer probe.mu.Unlock()
	for _, v := range probe.violations {
		t.Errorf("audit line written after its commit: %s", v)
	}
	n := 0
	for _, l := range auditLines(t, probe.b.String()) {
		if l["msg"] == "grant" || l["msg"] == "release" {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d grant and release lines, want 4:\n%s", n, probe.b.String())
	}
}

// TestAuditLinesCarryMode: grants, lapses, releases, withdrawals and
// revocations say shared or exclusive, and what ended says its token.
func TestAuditLinesCarryMode(t *testing.T) {

	audit := &lockedBuffer{}
	clock := engine.NewManualClock(time.Unix(1000, 0))
	a := startAudit(t, filepath.Join(t.TempDir(), "mode.db"), audit, clock, nil)
	a.ok("POST", "/v1/acquire", `{"client":"a","lock":"S","ttl":10,"mode":"shared"}`, "")
	a.ok("POST", "/v1/acquire", `{"client":"b","lock":"S","ttl":100,"mode":"shared"}`, "")
	a.ok("POST", "/v1/acquire", `{"client":"c","lock":"S","ttl":20,"mode":"exclusive"}`, "") // queued
	a.ok("POST", "/v1/acquire", `{"client":"d","lock":"S","ttl":20,"mode":"shared"}`, "")    // queued behind c
	a.ok("POST", "/v1/release", `{"client":"d","lock":"S"}`, "")                             // withdrawn
	a.ok("POST", "/v1/release", `{"client":"b","lock":"S"}`, "")
	clock.Set(time.Unix(1012, 0)) // a lapses at 1010: c is granted then
	a.ok("POST", "/v1/revoke", `{"client":"c","lock":"S"}`, "")

	lines := auditLines(t, audit.String())
	for _, want := range []map[string]any{
		{"msg": "grant", "lock": "S", "client": "a", "mode": "shared", "token": 1, "source": "immediate"},
		{"msg": "grant", "lock": "S", "client": "b", "mode": "shared", "token": 2},
		{"msg": "withdraw", "lock": "S", "client": "d", "mode": "shared", "position": 2},
		{"msg": "release", "lock": "S", "client": "b", "mode": "shared", "token": 2, "at": 1000},
		{"msg": "lapse", "lock": "S", "holder": "a", "mode": "shared", "token": 1, "at": 1010},
		{"msg": "grant", "lock": "S", "client": "c", "mode": "exclusive", "token": 3, "at": 1010, "source": "queue"},
		{"msg": "revoke", "lock": "S", "client": "c", "mode": "exclusive", "token": 3, "at": 1012},
	} {
		found := false
		for _, l := range lines {
			found = found || subset(l, want)
		}
		if !found {
			t.Errorf("no audit line %v in:\n%s", want, audit.String())
		}
	}
	// One group number per transaction, counted from 1 after the start line.
	if len(lines) == 0 || lines[0]["msg"] != "start" {
		t.Errorf("the log does not begin with a start line:\n%s", audit.String())
	}
	last := 0.0
	for _, l := range lines[1:] {
		g, _ := l["group"].(float64)
		if g < last || g == 0 {
			t.Errorf("line %v: group %v after %v", l, l["group"], last)
		}
		last = g
	}
}

// TestDeadlockAbortLine: the abort's line names what the victim lost (its
// leases and its queue entry), the client that asked, and the principals on
// both sides; and it comes before the grant it made room for.
func TestDeadlockAbortLine(t *testing.T) {
	ps, err := auth.Parse([]byte(fmt.Sprintf(`{"principals": [
		{"name": "team-a", "token_sha256": %q, "clients": ["a*"], "role": "client"},
		{"name": "team-b", "token_sha256": %q, "clients": ["b*"], "role": "client"}]}`,
		auth.HashToken("tok-a"), auth.HashToken("tok-b"))))
	if err != nil {
		t.Fatal(err)
	}

	audit := &lockedBuffer{}
	clock := engine.NewManualClock(time.Unix(500, 0))
	a := startAudit(t, filepath.Join(t.TempDir(), "abort.db"), audit, clock, auth.New(ps, nil))
	a.ok("POST", "/v1/acquire", `{"client":"a1","lock":"X","ttl":100}`, "tok-a")
	a.ok("POST", "/v1/acquire", `{"client":"b1","lock":"Y","ttl":100,"mode":"shared"}`, "tok-b")
	a.ok("POST", "/v1/acquire", `{"client":"b1","lock":"X","ttl":100}`, "tok-b") // queued
	// a1 asks for Y, held by b1, which waits for X, held by a1: b1, the
	// younger, is aborted, and Y passes to a1.
	got := a.ok("POST", "/v1/acquire", `{"client":"a1","lock":"Y","ttl":100}`, "tok-a")
	if !strings.Contains(got, `"victims":["b1"]`) {
		t.Fatalf("acquire answered %s, want b1 aborted", got)
	}
	lines := auditLines(t, audit.String())
	abort, grant := -1, -1
	for i, l := range lines {
		switch {
		case l["msg"] == "deadlock_abort":
			abort = i
		case subset(l, map[string]any{"msg": "grant", "lock": "Y", "client": "a1"}):
			grant = i
		}
	}
	if abort < 0 || grant < 0 {
		t.Fatalf("no abort or no grant of Y to a1 in:\n%s", audit.String())
	}
	want := map[string]any{"client": "b1", "requester": "a1", "principal": "team-b", "requester_principal": "team-a",
		"lost":        []lk.Holder{{Lock: "Y", Mode: lk.Shared, Token: 1, ExpiresAt: 600}},
		"waiting_for": "X", "position": 1, "mode": "exclusive", "cycle": []string{"a1", "b1"}, "at": 500}
	if !subset(lines[abort], want) {
		t.Errorf("abort line %v, want %v", lines[abort], want)
	}
	if grant < abort {
		t.Errorf("Y granted to a1 (line %d) before the abort that freed it (line %d):\n%s", grant+1, abort+1, audit.String())
	}
	checkDocumentedAbortLine(t, lines[abort])
}

// checkDocumentedAbortLine: docs/security.md shows the abort across
// principals that TestDeadlockAbortLine makes, as the audit log writes it:
// the same fields, and the same principals on both sides.
func checkDocumentedAbortLine(t *testing.T, real map[string]any) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.Contains(l, `"msg":"deadlock_abort"`) {
			if err := json.Unmarshal([]byte(l), &shown); err != nil {
				t.Fatalf("docs/security.md's deadlock_abort line is not JSON: %v\n%s", err, l)
			}
		}
	}
	if shown == nil {
		t.Fatal("docs/security.md shows no deadlock_abort line")
	}
	for k := range real {
		if _, ok := shown[k]; !ok {
			t.Errorf("docs/security.md's deadlock_abort line lacks %q", k)
		}
	}
	for k := range shown {
		if _, ok := real[k]; !ok {
			t.Errorf("docs/security.md's deadlock_abort line has %q, which the audit log does not write", k)
		}
	}
	for _, k := range []string{"client", "requester", "principal", "requester_principal", "waiting_for", "cycle"} {
		if fmt.Sprint(shown[k]) != fmt.Sprint(real[k]) {
			t.Errorf("docs/security.md's deadlock_abort line has %s %v, the audit log %v", k, shown[k], real[k])
		}
	}
}

// TestAuthFailuresExportedAtZero: the refusals counter is there before the
// first refusal, at 0, for each status an authorizer refuses with.
func TestAuthFailuresExportedAtZero(t *testing.T) {
	tel := telemetry.New(nil, nil, telemetry.Options{})
	rec := httptest.NewRecorder()
	tel.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, status := range []string{"401", "403"} {
		re := regexp.MustCompile(`(?m)^leasekeeper_auth_failures_total\{status="` + status + `"\} 0$`)
		if !re.MatchString(rec.Body.String()) {
			t.Errorf("/metrics lacks leasekeeper_auth_failures_total{status=%q} 0", status)
		}
	}
}

// TestAuditRecoverAfterKill: a kill between writing a group's lines and
// committing it leaves lines of a transaction that never happened, perhaps
// the last of them cut short. The next run ends the cut line, and cancels
// the group with a not_committed line when the database shows it never
// committed; a group that did commit stands.
func TestAuditRecoverAfterKill(t *testing.T) {
	dir := t.TempDir()
	dbPath, logPath := filepath.Join(dir, "r.db"), filepath.Join(dir, "audit.jsonl")
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
		a.ok("POST", "/v1/acquire", `{"client":"a","lock":"L","ttl":100}`, "")
		a.ok("POST", "/v1/acquire", `{"client":"b","lock":"L","ttl":100}`, "") // queued
	})
	// A clean run's last group committed: the next run leaves it be.
	log := run(nil)
	if strings.Contains(log, "not_committed") {
		t.Fatalf("a committed group was cancelled:\n%s", log)
	}

	// What a kill between the write and the COMMIT of a's release leaves:
	// its group's lines, and a line it was writing cut short.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"release","lock":"L","client":"a","mode":"exclusive","token":1,"at":100,"group":7}`+"\n")
	fmt.Fprintf(f, `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"grant","lock":"L","client":"b","mode":"exclusive","token":2,"at":100,"expires_at":200,"source":"queue","group":7}`+"\n")
	fmt.Fprintf(f, `{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"sta`)
	f.Close()

	log = run(func(a *auditServer) {
		// The new run's own groups come after the settlement.
		a.ok("POST", "/v1/release", `{"client":"a","lock":"L"}`, "")
	})
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	cut := -1
	for i, l := range lines {
		if strings.HasSuffix(l, `"msg":"sta`) {
			cut = i
		}
	}
	if cut < 0 || cut+2 >= len(lines) {
		t.Fatalf("the cut line is not a line of its own, followed by the next run's:\n%s", log)
	}
	var start, settle map[string]any
	json.Unmarshal([]byte(lines[cut+1]), &start)
	json.Unmarshal([]byte(lines[cut+2]), &settle)
	if start["msg"] != "start" || !subset(settle, map[string]any{"msg": "not_committed", "group": 7}) {
		t.Errorf("after the cut line: %q and %q, want a start line and not_committed of group 7", lines[cut+1], lines[cut+2])
	}
	// The release that did happen, in the new run, is there.
	found := false
	for _, l := range auditLines(t, strings.Join(lines[cut+1:], "\n")) {
		found = found || subset(l, map[string]any{"msg": "release", "client": "a", "token": 1, "group": 1})
	}
	if !found {
		t.Errorf("no release line of the new run:\n%s", log)
	}
}

// gateWriter is an audit log whose writes block while its gate is shut.
type gateWriter struct {
	lockedBuffer
	mu      sync.Mutex
	open    chan struct{} // closed while the gate is open
	entered chan struct{} // gets a value when a write waits at the gate
}

func newGate() *gateWriter {
	g := &gateWriter{open: make(chan struct{}), entered: make(chan struct{}, 16)}
	close(g.open)
	return g
}

func (g *gateWriter) shut() { g.mu.Lock(); g.open = make(chan struct{}); g.mu.Unlock() }
func (g *gateWriter) lift() { g.mu.Lock(); close(g.open); g.mu.Unlock() }

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	default:
		g.entered <- struct{}{}
		<-open
	}
	return g.lockedBuffer.Write(p)
}

// TestAuditBeforePeerWakes: on PostgreSQL, a release through one server
// grants the lock to a waiter blocked on another, which answers it as soon
// as it hears of the commit. The releasing server's audit lines must be
// written by then: with them written after the commit, a kill of that
// server in between left an answered grant that no audit log shows.
func TestAuditBeforePeerWakes(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := engine.NewManualClock(time.Unix(1000, 0))
	gate := newGate()
	a := startAudit(t, dsn, gate, clock, nil)
	b := startAudit(t, dsn, &lockedBuffer{}, clock, nil)
	a.ok("POST", "/v1/acquire", `{"client":"x","lock":"L","ttl":100}`, "")
	waited := make(chan string, 1)
	go func() {
		_, body := b.call("POST", "/v1/acquire", `{"client":"y","lock":"L","ttl":30,"wait":60}`, "")
		waited <- body
	}()
	testutil.Eventually(t, 10*time.Second, "y never queued", func() bool {
		return strings.Contains(a.ok("GET", "/v1/inspect?lock=L", "", ""), `"client":"y"`)
	})
	gate.shut()
	released := make(chan string, 1)
	go func() { released <- a.ok("POST", "/v1/release", `{"client":"x","lock":"L"}`, "") }()
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the release never wrote to the audit log")
	}
	// The release's lines wait at the gate. Nothing may be answered on
	// their account meanwhile: not y, through the other server.
	select {
	case body := <-waited:
		t.Errorf("y answered %s while the audit lines of the grant were not written", body)
	case body := <-released:
		t.Errorf("the release answered %s while its audit lines were not written", body)
	case <-time.After(2 * time.Second):
	}
	gate.lift()
	for _, ch := range []chan string{released, waited} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("no answer once the audit lines were written")
		}
	}
	found := false
	for _, l := range auditLines(t, gate.String()) {
		found = found || subset(l, map[string]any{"msg": "grant", "lock": "L", "client": "y", "source": "queue"})
	}
	if !found {
		t.Errorf("server a's log lacks the grant to y:\n%s", gate.String())
	}
}
