package e2e_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// openStream opens GET /v1/events with token on a new connection, whose
// receive buffer is small and which is never read past the answer's
// status line; it returns the status and the connection.
func openStream(t *testing.T, host, token string) (int, net.Conn) {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(16 << 10)
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		t.Fatalf("opening a stream: %v", err)
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		t.Fatalf("opening a stream: %q", line)
	}
	st, _ := strconv.Atoi(f[1])
	return st, conn
}

// TestEventStreamsCostLittle: a stream whose reader never reads holds
// little of the server's socket memory however many events come, and
// streams are bounded per principal (max_streams, 8 by default) and per
// server (--max-streams), 429 beyond.
func TestEventStreamsCostLittle(t *testing.T) {
	const watchToken, otherToken = "e2e-watch-token", "e2e-other-token"
	s := authServer(t, map[string]string{
		`{"name": "watch", "token_sha256": "TOKEN_SHA256", "role": "reader", "max_streams": 2}`: watchToken,
		`{"name": "other", "token_sha256": "TOKEN_SHA256", "role": "reader"}`:                   otherToken,
	}, "--max-streams", "11")
	host := hostOf(t, s)

	// The send buffer: one stream not read while events are produced.
	if _, err := exec.LookPath("ss"); err != nil {
		t.Log("no ss here: the send buffer is not checked")
	} else {
		if st, _ := openStream(t, host, adminToken); st != http.StatusOK {
			t.Fatalf("a stream: HTTP %d", st)
		}
		var wg sync.WaitGroup
		stop := time.Now().Add(4 * time.Second)
		long := strings.Repeat("x", 180)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := &http.Client{Timeout: 5 * time.Second}
				post := func(path, body string) {
					req, _ := http.NewRequest("POST", s.URL()+path, bytes.NewBufferString(body))
					req.Header.Set("Authorization", "Bearer "+adminToken)
					if r, err := hc.Do(req); err == nil {
						io.Copy(io.Discard, r.Body)
						r.Body.Close()
					}
				}
				for i := 0; time.Now().Before(stop); i++ {
					lock, cl := fmt.Sprintf("%s-%d-%d", long, g, i%20), fmt.Sprintf("%s-c%d", long, g)
					post("/v1/acquire", fmt.Sprintf(`{"client":%q,"lock":%q,"ttl":30}`, cl, lock))
					post("/v1/revoke", fmt.Sprintf(`{"client":%q,"lock":%q}`, cl, lock))
				}
			}()
		}
		wg.Wait()
		_, port, _ := net.SplitHostPort(host)
		out, err := exec.Command("ss", "-tmnH", "state", "established", "( sport = :"+port+" )").Output()
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		for _, m := range regexp.MustCompile(`skmem:\(r\d+,rb\d+,t\d+,tb\d+,f\d+,w(\d+)`).FindAllSubmatch(out, -1) {
			n, _ := strconv.Atoi(string(m[1]))
			most = max(most, n)
		}
		t.Logf("the unread stream's socket holds %d bytes queued on the server's side", most)
		if most > 256<<10 {
			t.Errorf("a stream nobody reads has %d bytes queued in the server's socket; want at most 256 KB", most)
		}
	}

	// Per principal: watch has max_streams 2, other the default 8.
	for i := range 3 {
		st, _ := openStream(t, host, watchToken)
		if want := map[bool]int{true: 200, false: 429}[i < 2]; st != want {
			t.Errorf("watch's stream %d (max_streams 2): HTTP %d, want %d", i+1, st, want)
		}
	}
	for i := range 9 {
		st, _ := openStream(t, host, otherToken)
		if want := map[bool]int{true: 200, false: 429}[i < 8]; st != want {
			t.Errorf("other's stream %d (max_streams left out: 8): HTTP %d, want %d", i+1, st, want)
		}
	}
	// Per server: 1 + 2 + 8 = 11 open, --max-streams 11.
	if st, _ := openStream(t, host, adminToken); st != http.StatusTooManyRequests {
		t.Errorf("a stream past --max-streams 11: HTTP %d, want 429", st)
	}
}
