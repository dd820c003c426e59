package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// TestInvalidUTF8Names: a name that is not valid UTF-8 as sent, in a body
// (bytes, or a \u escape of an unpaired surrogate, which encoding/json
// would turn into U+FFFD) or in a query parameter, is refused with 400
// naming the field, on both backends; "\ud800" and "\ufffd" are not the
// same lock. A surrogate pair is a character like any other.
func TestInvalidUTF8Names(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		for _, c := range []struct{ method, path, body, field string }{
			{"POST", "/v1/acquire", `{"client": "a", "lock": "\ud800", "ttl": 10}`, "lock"},
			{"POST", "/v1/acquire", `{"client": "a", "lock": "x\udc00y", "ttl": 10}`, "lock"},
			{"POST", "/v1/acquire", `{"client": "a", "lock": "\ud800\u0041", "ttl": 10}`, "lock"},
			{"POST", "/v1/acquire", `{"client": "a", "lock": "\ud800", "ttl": 10, "lock": "ok"}`, ""}, // the last one counts
			{"POST", "/v1/acquire", "{\"client\": \"caf\xe9\", \"lock\": \"L\", \"ttl\": 10}", "client"},
			{"POST", "/v1/write", `{"lock": "L", "key": "\udfff", "value": "v", "token": 1}`, "key"},
			{"POST", "/v1/write", "{\"lock\": \"L\", \"key\": \"k\", \"value\": \"\xff\", \"token\": 1}", "value"},
			{"GET", "/v1/status?client=caf%E9", "", "client"},
			{"GET", "/v1/inspect?lock=%ED%A0%80", "", "lock"}, // a surrogate in UTF-8's form
			{"GET", "/v1/locks?after=%FF", "", "after"},
		} {
			status, v := f.raw(c.method, c.path, c.body)
			if c.field == "" {
				if status != http.StatusOK {
					t.Errorf("%s %s %s: HTTP %d %v, want 200", c.method, c.path, c.body, status, v)
				}
				continue
			}
			expectError(t, status, v, lk.CodeInvalidArguments, c.field+" must be valid UTF-8")
		}
		// Escapes that are text: a surrogate pair, an escaped
		// backslash before "ud800", U+FFFD itself.
		_, v := f.raw("POST", "/v1/acquire", `{"client": "b", "lock": "\ud83d\ude00", "ttl": 10}`)
		expect(t, v, granted(1, 1000, 1010))
		_, v = f.raw("POST", "/v1/acquire", `{"client": "c", "lock": "\\ud800", "ttl": 10}`)
		expect(t, v, granted(1, 1000, 1010))
		_, v = f.raw("POST", "/v1/acquire", `{"client": "d", "lock": "\ufffd", "ttl": 10}`)
		expect(t, v, granted(1, 1000, 1010))
		_, v = f.call("GET", "/v1/inspect?lock=%F0%9F%98%80", nil)
		expect(t, v, `{"lock": "😀", "holders": [{"client": "b", "mode": "exclusive", "token": 1, "expires_at": 1010}], "queue": [], "holder_count": 1, "queue_length": 0}`)
		_, v = f.call("GET", "/v1/inspect?lock=ok", nil)
		expect(t, v, `{"lock": "ok", "holders": [{"client": "a", "mode": "exclusive", "token": 1, "expires_at": 1010}], "queue": [], "holder_count": 1, "queue_length": 0}`)
	})
}

// rawExchange sends req on a new connection to addr, reads one answer, and
// returns it with the connection, for tests of what happens to it next.
func rawExchange(t *testing.T, addr, req string) (*http.Response, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, conn, br
}

// closedAfter reports whether the server closed conn, read through br:
// the next read ends (EOF or reset) rather than time out.
func closedAfter(conn net.Conn, br *bufio.Reader, within time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(within))
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errorsAs(err, &ne) && ne.Timeout())
}

func errorsAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// TestRefusalClosesConnection: a request refused before it is judged (401,
// 403, 400, 413, 404, 405) is answered with Connection: close, and its
// connection closed; an answered request keeps it (keep-alive).
func TestRefusalClosesConnection(t *testing.T) {
	tokenOnly := authorizerFunc(func(r *http.Request, a server.Access) *server.Denial {
		switch {
		case a.Op == "health":
			return nil
		case r.Header.Get("Authorization") == "":
			return &server.Denial{Code: lk.CodeUnauthenticated, Message: "no token"}
		case a.Client == "mallory":
			return &server.Denial{Code: lk.CodeForbidden, Message: "not mallory"}
		}
		return nil
	})
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "refuse.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: tokenOnly})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	post := func(path, body, hdr string) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s", path, hdr, len(body), body)
	}
	const token = "Authorization: Bearer t\r\n"
	for _, c := range []struct {
		req    string
		status int
		closes bool
	}{
		{"GET /v1/locks HTTP/1.1\r\nHost: x\r\n\r\n", 401, true},
		{post("/v1/acquire", `{"client": "mallory", "lock": "L", "ttl": 10}`, token), 403, true},
		{post("/v1/acquire", `{"client": "a", "lock": "L"`, token), 400, true},
		{post("/v1/acquire", `{"client": "a", "lock": "L", "ttl": 0}`, ""), 400, true},
		{post("/v1/write", `{"value": "`+strings.Repeat("v", server.MaxBodyBytes)+`"}`, token), 413, true},
		{"GET /v2/x HTTP/1.1\r\nHost: x\r\n\r\n", 404, true},
		{"GET /v1/acquire HTTP/1.1\r\nHost: x\r\n\r\n", 405, true},
		{"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 200, false},
		{post("/v1/acquire", `{"client": "a", "lock": "L", "ttl": 10}`, token), 200, false},
		{post("/v1/renew", `{"client": "b", "lock": "L", "ttl": 10}`, token), 409, false}, // judged: not a refusal
	} {
		resp, conn, br := rawExchange(t, ln.Addr().String(), c.req)
		if resp.StatusCode != c.status {
			t.Errorf("%.60q: HTTP %d, want %d", c.req, resp.StatusCode, c.status)
		}
		if got := resp.Close; got != c.closes { // Connection: close, which ReadResponse takes out of the header
			t.Errorf("%.60q: Connection: close is %v, want %v", c.req, got, c.closes)
		}
		// A close is waited for longer (a busy machine, -race) than an
		// open connection is watched for one.
		wait := 500 * time.Millisecond
		if c.closes {
			wait = 3 * time.Second
		}
		if got := closedAfter(conn, br, wait); got != c.closes {
			t.Errorf("%.60q: connection closed after the answer is %v, want %v", c.req, got, c.closes)
		}
	}
}

type authorizerFunc func(r *http.Request, a server.Access) *server.Denial

func (f authorizerFunc) Authorize(r *http.Request, a server.Access) *server.Denial { return f(r, a) }

// TestLogLimiter: a burst, then the rate; what is held back is reported as
// one count, and nothing is lost from the total.
func TestLogLimiter(t *testing.T) {
	var mu sync.Mutex
	var reports []int
	l := server.NewLogLimiter(0.001, 5, func(n int) { mu.Lock(); reports = append(reports, n); mu.Unlock() })
	allowed := 0
	for range 1000 {
		if l.Allow() {
			allowed++
		}
	}
	l.Flush()
	l.Flush() // nothing held back: no report
	mu.Lock()
	defer mu.Unlock()
	if allowed != 5 || len(reports) != 1 || reports[0] != 995 {
		t.Errorf("1000 lines: %d allowed, reports %v; want 5 and [995]", allowed, reports)
	}
}

// TestLogLimiterFlushWaits: a Flush while another is reporting (the
// timer's, as a shutdown comes) returns only once that report is written:
// serve exits after its Flush, and a count taken but not yet written was
// lost with the process.
func TestLogLimiterFlushWaits(t *testing.T) {
	reporting, release := make(chan struct{}), make(chan struct{})
	var written atomic.Bool
	l := server.NewLogLimiter(0.001, 1, func(n int) {
		close(reporting)
		<-release
		written.Store(true)
	})
	l.Allow()
	l.Allow() // held back
	go l.Flush()
	<-reporting
	done := make(chan struct{})
	go func() { l.Flush(); close(done) }()
	select {
	case <-done:
		t.Fatal("a second Flush returned while the first was still reporting")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	if !written.Load() {
		t.Error("the count was not written when Flush returned")
	}
}

// guarded serves srv through an http.Server with the connection guards of
// opts and the timeouts given, on loopback.
func guarded(t *testing.T, srv *server.Server, opts server.ConnOptions, hs *http.Server) (*server.Conns, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := server.NewConns(opts)
	hs.Handler = srv.Handler()
	conns.Configure(hs)
	go hs.Serve(conns.Listener(ln))
	t.Cleanup(func() { hs.Close() })
	return conns, ln.Addr().String()
}

func newServer(t *testing.T) *server.Server {
	t.Helper()
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "conns.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	t.Cleanup(func() { eng.Drain(); eng.Close() })
	return srv
}

// TestConnsCapReclaimsIdle: with a cap of 3 and 12 keep-alive connections
// left idle after an answer, each new connection is still served, by
// closing the connection idle the longest; at the end at most 3 are open.
func TestConnsCapReclaimsIdle(t *testing.T) {
	srv := newServer(t)
	_, addr := guarded(t, srv, server.ConnOptions{Max: 3}, &http.Server{})
	type held struct {
		conn net.Conn
		br   *bufio.Reader
		err  error
	}
	answered := make(chan held, 12)
	for range 12 {
		go func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				answered <- held{err: err}
				return
			}
			conn.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != 200 {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
			}
			answered <- held{conn, br, err} // then idle, held open by this side
		}()
	}
	var idle []held
	for range 12 {
		h := <-answered
		if h.conn != nil {
			defer h.conn.Close()
		}
		if h.err != nil {
			t.Fatalf("a connection beyond the cap was not served: %v", h.err)
		}
		idle = append(idle, h)
	}
	resp, _, _ := rawExchange(t, addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("health: HTTP %d", resp.StatusCode)
	}
	open := 0
	for _, h := range idle {
		if !closedAfter(h.conn, h.br, 100*time.Millisecond) {
			open++
		}
	}
	if open > 2 { // and the health request's
		t.Errorf("%d of the idle connections are still open, with the one of the last request; want at most 3 in all", open)
	}
}

// TestBlockedAcquireOutlivesReadTimeout: the read timeout bounds reading a
// request, not the wait of a blocked acquire (net/http would cancel its
// context when the connection's read deadline passes).
func TestBlockedAcquireOutlivesReadTimeout(t *testing.T) {
	srv := newServer(t)
	_, addr := guarded(t, srv, server.ConnOptions{WriteTimeout: 300 * time.Millisecond}, &http.Server{ReadTimeout: 300 * time.Millisecond})
	base := "http://" + addr
	hc := validated(t)
	if got, err := postWith(hc, base+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 60}`); err != nil || !strings.Contains(got, `"granted"`) {
		t.Fatalf("acquire: %s %v", got, err)
	}
	blocked := make(chan string, 1)
	go func() {
		got, err := postWith(hc, base+"/v1/acquire", `{"client": "b", "lock": "L", "ttl": 60, "wait": 10}`)
		if err != nil {
			got = err.Error()
		}
		blocked <- got
	}()
	time.Sleep(1200 * time.Millisecond) // four read timeouts, and as many write timeouts
	if got, err := postWith(hc, base+"/v1/release", `{"client": "a", "lock": "L"}`); err != nil || !strings.Contains(got, `"released"`) {
		t.Fatalf("release: %s %v", got, err)
	}
	select {
	case got := <-blocked:
		if !strings.Contains(got, `"outcome":"granted","token":2`) {
			t.Errorf("the blocked acquire answered %s, want its grant", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked acquire was not answered")
	}
}

func postWith(hc *http.Client, url, body string) (string, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// TestConnsCapSparesRequestUnderWay: at the cap, the keep-alive connection
// idle longest is not cut when it has begun its next request (net/http has
// read part of it, so the connection still counts as idle): a quiet one is
// cut instead, and the request under way is answered.
func TestConnsCapSparesRequestUnderWay(t *testing.T) {
	srv := newServer(t)
	_, addr := guarded(t, srv, server.ConnOptions{Max: 2}, &http.Server{})
	dialServed := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		return conn, br
	}
	busy, busyReader := dialServed() // idle first: the oldest
	time.Sleep(50 * time.Millisecond)
	quiet, quietReader := dialServed() // at the cap now
	io.WriteString(busy, "GET /v1/health HTTP/1.1\r\nHo")
	time.Sleep(700 * time.Millisecond) // both idle past the reclaim threshold; busy's bytes read
	resp, _, _ := rawExchange(t, addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("a connection beyond the cap: HTTP %d", resp.StatusCode)
	}
	io.WriteString(busy, "st: x\r\n\r\n")
	r, err := http.ReadResponse(busyReader, nil)
	if err != nil {
		t.Fatalf("the request under way on the oldest idle connection was cut: %v", err)
	}
	io.Copy(io.Discard, r.Body)
	if r.StatusCode != 200 {
		t.Errorf("the request under way: HTTP %d", r.StatusCode)
	}
	if !closedAfter(quiet, quietReader, time.Second) {
		t.Error("the quiet idle connection was not the one closed")
	}
}

// TestConnsHeaderDeadlineFromFirstByte: a keep-alive connection that sends
// the first two bytes of its next request and nothing more is closed once
// the header timeout has passed since them, not held for the idle timeout
// (net/http's own header timer starts only at the fourth byte).
func TestConnsHeaderDeadlineFromFirstByte(t *testing.T) {
	srv := newServer(t)
	_, addr := guarded(t, srv, server.ConnOptions{HeaderTimeout: 300 * time.Millisecond},
		&http.Server{IdleTimeout: time.Minute, ReadHeaderTimeout: 300 * time.Millisecond})
	_, conn, br := rawExchange(t, addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(conn, "GE")
	start := time.Now()
	if !closedAfter(conn, br, 3*time.Second) {
		t.Fatalf("a connection that sent 2 bytes of a request was still open after %v (header timeout 300ms)", time.Since(start).Round(time.Millisecond))
	}
	// An idle connection that sends nothing keeps to the idle timeout.
	_, conn, br = rawExchange(t, addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if closedAfter(conn, br, time.Second) {
		t.Error("an idle keep-alive connection was closed within a second (idle timeout 1m)")
	}
}

// TestConnsProbeSlots: with the cap full of requests whose headers are in
// (their bodies still coming), a health probe on a new connection is
// answered, past the cap, and any other request there gets 503.
func TestConnsProbeSlots(t *testing.T) {
	srv := newServer(t)
	_, addr := guarded(t, srv, server.ConnOptions{Max: 2}, &http.Server{})
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		io.WriteString(conn, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	resp, _, _ := rawExchange(t, addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 || time.Since(start) > 3*time.Second {
		t.Errorf("a probe at the cap: HTTP %d after %v; want 200 within 3 s", resp.StatusCode, time.Since(start))
	}
	resp, conn, br := rawExchange(t, addr, "GET /v1/locks HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("another request on a probe slot: HTTP %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if !closedAfter(conn, br, time.Second) {
		t.Error("the probe slot's connection was not closed after its 503")
	}
}
