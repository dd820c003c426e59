package e2e_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
)

// adminToken is the token of the admin principal of authServer's file.
const adminToken = "e2e-admin-token"

// authServer starts one server with an auth file of an admin principal and
// more principals (JSON objects, each with its name and token as tokens'
// keys and values), and args.
func authServer(t *testing.T, extra map[string]string, args ...string) *cluster.Server {
	t.Helper()
	hash := func(tok string) string { s := sha256.Sum256([]byte(tok)); return hex.EncodeToString(s[:]) }
	ps := []string{fmt.Sprintf(`{"name": "ops", "token_sha256": %q, "role": "admin"}`, hash(adminToken))}
	for body, tok := range extra {
		ps = append(ps, strings.Replace(body, "TOKEN_SHA256", hash(tok), 1))
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(file, []byte(`{"principals": [`+strings.Join(ps, ", ")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, cluster.Options{Args: append([]string{"--auth-file", file}, args...)})
	return c.Servers[0]
}

// hostOf returns the host:port of a server's URL.
func hostOf(t *testing.T, s *cluster.Server) string {
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestNoLockoutWithoutToken is the attack of issue 20: at --max-connections
// 100, 110 connections without a token each ask GET /v1/health, read the
// answer, send the first two bytes of another request and hold (and connect
// again when cut). Authenticated requests, each on a new connection, and
// probes must keep being answered within a second.
func TestNoLockoutWithoutToken(t *testing.T) {
	s := authServer(t, nil, "--max-connections", "100")
	host := hostOf(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var held sync.Map // the attackers' open connections, closed at the end
	for i := range 110 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				conn, err := net.DialTimeout("tcp", host, 5*time.Second)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				held.Store(i, conn)
				br := bufio.NewReader(conn)
				if _, err := io.WriteString(conn, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
					if resp, err := http.ReadResponse(br, nil); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if _, err := io.WriteString(conn, "GE"); err == nil {
							br.ReadByte() // hold until the server closes it
						}
					}
				}
				conn.Close()
			}
		}()
	}
	go func() {
		<-ctx.Done()
		held.Range(func(_, c any) bool { c.(net.Conn).Close(); return true })
	}()
	time.Sleep(3 * time.Second) // the attack takes every slot

	ask := func(path, token string) (int, time.Duration, error) {
		cl := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", s.URL()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		start := time.Now()
		resp, err := cl.Do(req)
		if err != nil {
			return 0, time.Since(start), err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start), nil
	}
	var worst time.Duration
	failed := 0
	for i := range 30 {
		path, token := "/v1/locks", adminToken
		if i%3 == 2 {
			path, token = "/v1/health", ""
		}
		st, took, err := ask(path, token)
		worst = max(worst, took)
		if err != nil || st != http.StatusOK {
			failed++
			t.Errorf("under the attack, GET %s: status %d, err %v, after %v; want 200 within 1 s", path, st, err, took.Round(time.Millisecond))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("30 requests under the attack: %d failed, the slowest took %v", failed, worst.Round(time.Millisecond))
}

// rawRequest sends head on a new connection to s, then body (if any) from
// another goroutine, and returns the answer's status and how long it took.
func rawRequest(t *testing.T, s *cluster.Server, head string, body io.Reader) (int, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", hostOf(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if body != nil {
		go io.Copy(conn, body) // fails once the server closes
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("reading the answer after %v: %v", time.Since(start).Round(time.Millisecond), err)
		return 0, time.Since(start)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// TestTokenlessBodyNotRead: a request without a token is refused on its
// headers, before its body is read: one whose body never comes is answered
// at once, not after the read timeout, and a body past the size limit gets
// 401, not 413.
func TestTokenlessBodyNotRead(t *testing.T) {
	s := authServer(t, nil)
	st, took := rawRequest(t, s, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n", nil)
	if st != http.StatusUnauthorized || took > 2*time.Second {
		t.Errorf("Content-Length: 100 and no body, no token: status %d after %v; want 401 at once", st, took.Round(time.Millisecond))
	}
	const big = 50 << 20
	st, took = rawRequest(t, s, fmt.Sprintf("POST /v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", big),
		io.LimitReader(zeros{}, big))
	if st != http.StatusUnauthorized {
		t.Errorf("a 50 MB body without a token: status %d after %v; want 401", st, took.Round(time.Millisecond))
	}
	// With a token, the body is read as before.
	st, _ = rawRequest(t, s, "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+adminToken+"\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", nil)
	if st != http.StatusBadRequest {
		t.Errorf("an authenticated acquire with an empty object: status %d, want 400", st)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
