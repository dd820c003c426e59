package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/auth"
)

// Tests of serve against clients that hold connections without using them
// (docs/deployment.md, "Connections"), with the real binary on loopback.

// limitsAuthFile writes an auth file with one admin, whose token is "ops".
func limitsAuthFile(t *testing.T, dir string) string {
	path := filepath.Join(dir, "auth.json")
	writeFile(t, path, `{"principals": [{"name": "ops", "token_sha256": "`+auth.HashToken("ops")+`", "role": "admin"}]}`)
	return path
}

// hostOf is the host:port of a server's base URL.
func hostOf(base string) string { return strings.TrimPrefix(base, "http://") }

// heldConn is a connection the test holds open after one exchange.
type heldConn struct {
	conn   net.Conn
	br     *bufio.Reader
	status int
	err    error
}

// exchange sends req on a new connection to addr and reads one answer,
// within timeout; the connection is left open.
func exchange(addr, req string, timeout time.Duration) heldConn {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return heldConn{err: err}
	}
	conn.SetDeadline(time.Now().Add(timeout))
	h := heldConn{conn: conn, br: bufio.NewReader(conn)}
	if _, h.err = io.WriteString(conn, req); h.err != nil {
		return h
	}
	resp, err := http.ReadResponse(h.br, nil)
	if h.err = err; err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.status = resp.StatusCode
	}
	return h
}

// holdIdle opens n connections to addr at once, a third of them answered
// 401 (no token), a third answered a health check, a third sending
// nothing, and leaves them open.
func holdIdle(t *testing.T, addr string, n int) []heldConn {
	out := make(chan heldConn, n)
	for i := range n {
		switch i % 3 {
		case 0:
			go func() { out <- exchange(addr, "GET /v1/locks HTTP/1.1\r\nHost: x\r\n\r\n", 10*time.Second) }()
		case 1:
			go func() { out <- exchange(addr, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 10*time.Second) }()
		default:
			go func() {
				conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
				out <- heldConn{conn: conn, err: err}
			}()
		}
	}
	held := make([]heldConn, 0, n)
	answered := 0
	for range n {
		h := <-out
		if h.conn != nil {
			t.Cleanup(func() { h.conn.Close() })
		}
		if h.status != 0 {
			answered++
		}
		held = append(held, h)
	}
	t.Logf("%d connections held open, %d of them after an answer", n, answered)
	return held
}

// healthWithin checks that GET /v1/health on a new connection answers
// within d.
func healthWithin(t *testing.T, base string, d time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: d, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := hc.Get(base + "/v1/health")
	if err != nil {
		t.Fatalf("health on a new connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("health: HTTP %d", resp.StatusCode)
	}
	t.Logf("health answered in %v", time.Since(start).Round(time.Millisecond))
}

// TestServeConnectionCap: connections held open beyond what the server can
// have do not lock it out. With a file limit of 100 (the default cap is then
// 80) and 200 connections held open, after a 401, idle after an answer, or
// silent, health on a new connection answers within 2 s; without the cap
// the server ran out of files ("accept4: too many open files") and answered
// nothing more. With --max-connections 50 the server never has more than 50.
func TestServeConnectionCap(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sets the file limit with sh's ulimit and counts sockets in /proc")
	}
	bin := buildBinary(t)
	t.Run("file limit 100", func(t *testing.T) {
		dir := t.TempDir()
		wrapper := filepath.Join(dir, "lowfiles.sh")
		writeFile(t, wrapper, "#!/bin/sh\nulimit -n 100 || exit 97\nexec "+shellQuote(bin)+" \"$@\"\n")
		if err := os.Chmod(wrapper, 0o755); err != nil {
			t.Fatal(err)
		}
		srv := startServe(t, wrapper, filepath.Join(dir, "serve.db"), "--auth-file", limitsAuthFile(t, dir))
		holdIdle(t, hostOf(srv.URL()), 200)
		healthWithin(t, srv.URL(), 2*time.Second)
		if log := srv.Log(); !strings.Contains(log, "the file limit is low") {
			t.Errorf("no warning of the low file limit at start:\n%s", log)
		}
	})
	t.Run("max-connections 50", func(t *testing.T) {
		dir := t.TempDir()
		srv := startServe(t, bin, filepath.Join(dir, "serve.db"), "--auth-file", limitsAuthFile(t, dir), "--max-connections", "50")
		holdIdle(t, hostOf(srv.URL()), 200)
		healthWithin(t, srv.URL(), 2*time.Second)
		// The listener and the connections: at most 51 sockets.
		if n := sockets(t, srv.Pid()); n > 51 {
			t.Errorf("the server has %d sockets open, beyond --max-connections 50 and its listener", n)
		}
	})
}

// sockets counts the sockets a process has open.
func sockets(t *testing.T, pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// closedWithin reports whether the server ends the connection (EOF or a
// reset, after whatever answer it sends) within d.
func closedWithin(conn net.Conn, br *bufio.Reader, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestServeIdleTimeout: a keep-alive connection idle for --idle-timeout is
// closed (it stayed open over 60 s).
func TestServeIdleTimeout(t *testing.T) {
	bin := buildBinary(t)
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "serve.db"), "--idle-timeout", "1s")
	h := exchange(hostOf(srv.URL()), "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", 5*time.Second)
	if h.err != nil || h.status != 200 {
		t.Fatalf("health: %d %v", h.status, h.err)
	}
	defer h.conn.Close()
	start := time.Now()
	if !closedWithin(h.conn, h.br, 6*time.Second) {
		t.Fatal("an idle connection was still open 6 s after its answer, with --idle-timeout 1s")
	}
	t.Logf("closed %v after its answer", time.Since(start).Round(10*time.Millisecond))
}

// TestServeReadTimeout: reading a request, body included, is bounded by
// --read-timeout: a body trickling a byte a second, or a Content-Length with
// no body, held a connection for over 60 s. A blocked acquire, whose body
// was read, keeps its connection for its whole wait.
func TestServeReadTimeout(t *testing.T) {
	bin := buildBinary(t)
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "serve.db"), "--read-timeout", "2s")
	addr := hostOf(srv.URL())
	headers := "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\n\r\n"
	for _, c := range []struct {
		name    string
		trickle bool
	}{{"no body", false}, {"a byte a second", true}} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, headers); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			if c.trickle {
				go func() {
					for _, b := range []byte(`{"client": "a", "lock": "L", "ttl": 10}` + strings.Repeat(" ", 30)) {
						select {
						case <-stop:
							return
						case <-time.After(time.Second):
						}
						if _, err := conn.Write([]byte{b}); err != nil {
							return
						}
					}
				}()
			}
			start := time.Now()
			if !closedWithin(conn, bufio.NewReader(conn), 8*time.Second) {
				t.Fatal("the connection was still open 8 s later, with --read-timeout 2s")
			}
			t.Logf("closed after %v", time.Since(start).Round(10*time.Millisecond))
		})
	}
	t.Run("blocked acquire", func(t *testing.T) {
		hc := validated(t)
		if got, err := postWith(hc, srv.URL()+"/v1/acquire", `{"client": "a", "lock": "W", "ttl": 60}`); err != nil || !strings.Contains(got, `"granted"`) {
			t.Fatalf("acquire: %s %v", got, err)
		}
		blocked := make(chan string, 1)
		go func() {
			got, err := postWith(hc, srv.URL()+"/v1/acquire", `{"client": "b", "lock": "W", "ttl": 60, "wait": 20}`)
			if err != nil {
				got = err.Error()
			}
			blocked <- got
		}()
		time.Sleep(5 * time.Second) // past the read timeout, twice
		if got, err := postWith(hc, srv.URL()+"/v1/release", `{"client": "a", "lock": "W"}`); err != nil || !strings.Contains(got, `"released"`) {
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
	})
}

// TestServeWriteTimeout: a client that sends requests and never reads the
// answers cannot make the server hold them: a write that the client does
// not take within --write-timeout fails and the connection is closed.
// (Forty such clients of GET /v1/locks took a server from 31 MB to 2.6 GB.)
// The answers here are the OpenAPI document's, some 50 kB each, as large
// as a locks page gets without filling the database first.
func TestServeWriteTimeout(t *testing.T) {
	bin := buildBinary(t)
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "serve.db"), "--write-timeout", "1s")
	conn, err := net.Dial("tcp", hostOf(srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 1000 // some 50 MB of answers: far beyond the sockets' buffers
	go func() {
		conn.SetWriteDeadline(time.Now().Add(20 * time.Second))
		for range n {
			if _, err := io.WriteString(conn, "GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				return
			}
		}
	}()
	time.Sleep(4 * time.Second) // the server's writes block, and time out
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server still held the connection after %d bytes of answers, with --write-timeout 1s", got)
	}
	t.Logf("the server closed the connection after %d bytes of answers (%v)", got, err)
	healthWithin(t, srv.URL(), 2*time.Second)
}

// TestServeShutdownHalfBody: SIGTERM while a request body is half sent
// stops the server within 10 s, exit status 0 (it took 15 s and exited 1,
// "context deadline exceeded"): reading requests stops at once.
func TestServeShutdownHalfBody(t *testing.T) {
	bin := buildBinary(t)
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "serve.db"))
	conn, err := net.Dial("tcp", hostOf(srv.URL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"client\": \"a\", "); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the server is reading the body
	start := time.Now()
	srv.Signal(syscall.SIGTERM)
	code, err := srv.Wait(12 * time.Second)
	if err != nil {
		t.Fatalf("serve still ran 12 s after SIGTERM:\n%s", srv.Log())
	}
	took := time.Since(start)
	if code != 0 || took > 10*time.Second {
		t.Errorf("serve exited with status %d %v after SIGTERM; want 0 within 10 s\n%s", code, took.Round(10*time.Millisecond), srv.Log())
	}
	t.Logf("stopped %v after SIGTERM", took.Round(10*time.Millisecond))
}

// TestServeRefusalLogBounded: 1,000 requests without a token reach the
// server's log and its audit log at a bounded rate (20,000 wrote 6 MB of
// logs), with lines "suppressed N refusals" counting the rest, so that
// every refusal is accounted for.
func TestServeRefusalLogBounded(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	srv := startServe(t, bin, filepath.Join(dir, "serve.db"), "--auth-file", limitsAuthFile(t, dir), "--audit-log", auditPath)
	const n = 1000
	start := time.Now()
	var wg sync.WaitGroup
	var refused sync.Map
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Timeout: 10 * time.Second}
			for i := w; i < n; i += 8 {
				resp, err := hc.Get(srv.URL() + "/v1/locks")
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				refused.Store(i, resp.StatusCode == http.StatusUnauthorized)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := range n {
		if v, _ := refused.Load(i); v != true {
			t.Fatalf("request %d was not answered 401", i)
		}
	}
	// No wait for the last count, reported a second after its first
	// refusal: a stop reports it at once (it was lost when the stop came
	// sooner).
	srv.Stop()
	// A burst of 50, then 10 a second, and a count a second.
	bound := 50 + int(10*(elapsed.Seconds()+2)) + 5
	count := func(name, text, line string, suppressed *regexp.Regexp) {
		lines, held := strings.Count(text, line), heldBack(text, suppressed)
		t.Logf("%s: %d refusals in %v: %d lines, %d suppressed, %d bytes", name, n, elapsed.Round(time.Millisecond), lines, held, len(text))
		if lines > bound {
			t.Errorf("%s: %d lines of refusals, want at most %d", name, lines, bound)
		}
		if lines+held != n {
			t.Errorf("%s: %d lines and %d suppressed, want %d in all", name, lines, held, n)
		}
	}
	count("server log", srv.Log(), "request refused: unauthenticated", regexp.MustCompile(`"msg":"suppressed \d+ refusals","suppressed":(\d+)`))
	audit, err := os.ReadFile(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	count("audit log", string(audit), `"msg":"auth_failure"`, regexp.MustCompile(`"msg":"refusals_suppressed","count":(\d+)`))
}

// TestServeHTTPLogCountedAtStop: net/http's own lines (a failed TLS
// handshake each) reach the server's log at a bounded rate, and a line
// "suppressed N lines of net/http" counts the rest, also when serve stops
// within the second after them (the count was lost then).
func TestServeHTTPLogCountedAtStop(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	_, certFile, keyFile := writeTestPKI(t, dir)
	srv := startServe(t, bin, filepath.Join(dir, "serve.db"),
		"--auth-file", limitsAuthFile(t, dir), "--tls-cert", certFile, "--tls-key", keyFile)
	const n = 200
	addr := strings.TrimPrefix(srv.URL(), "https://")
	for range n {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Plain HTTP to the TLS port: net/http logs the failed handshake
		// and answers 400.
		io.WriteString(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
		io.Copy(io.Discard, conn)
		conn.Close()
	}
	srv.Stop()
	text := srv.Log()
	lines := strings.Count(text, "TLS handshake error")
	held := heldBack(text, regexp.MustCompile(`"msg":"suppressed \d+ lines of net/http","suppressed":(\d+)`))
	t.Logf("%d failed handshakes: %d lines, %d suppressed", n, lines, held)
	if lines+held != n || lines >= n {
		t.Errorf("%d failed handshakes: %d lines and %d suppressed, want some suppressed and %d in all", n, lines, held, n)
	}
}

// heldBack sums the counts of the log lines that say how many lines were
// held back: suppressed's first group, in each of its matches in text.
func heldBack(text string, suppressed *regexp.Regexp) int {
	held := 0
	for _, m := range suppressed.FindAllStringSubmatch(text, -1) {
		k, _ := strconv.Atoi(m[1])
		held += k
	}
	return held
}
