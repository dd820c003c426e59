//go:build unix

package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// TestEventsStalledReader: a reader that takes nothing does not slow the
// committer (acquires go on at their usual pace while its connection is
// full), and when it reads again it finds "overflow" and the end of the
// stream, once it is further behind than the buffer.
func TestEventsStalledReader(t *testing.T) {
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "o.db"), engine.Options{Clock: engine.NewManualClock(time.Unix(1000, 0)), EventsBuffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	hs := httptest.NewUnstartedServer(srv.Handler())
	// Small socket buffers on the server's side too: the kernel would
	// otherwise take megabytes before a write blocks.
	hs.Listener = smallBuffers{hs.Listener}
	hs.Start()
	t.Cleanup(func() {
		eng.Drain()
		hs.CloseClientConnections()
		hs.Close()
		eng.Close()
	})
	f := &fixture{t: t, url: hs.URL, eng: eng, hc: validated(t)}
	u, _ := url.Parse(f.url)
	// A small receive buffer: the connection fills after a few events,
	// and the server's writes to it block.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
	}}
	conn, err := d.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /v1/events HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
	time.Sleep(100 * time.Millisecond) // the stream is open

	// Acquire and release many locks while the reader takes nothing:
	// thousands of events, far beyond its connection and the buffer.
	const workers, rounds = 8, 250
	var mu sync.Mutex
	var took []time.Duration
	start := time.Now()
	concurrently(workers, func(w int) {
		for i := range rounds {
			lock := fmt.Sprintf("w%d-%d", w, i)
			t0 := time.Now()
			f.call("POST", "/v1/acquire", map[string]any{"client": fmt.Sprint("c", w), "lock": lock, "ttl": 60})
			t1 := time.Now()
			f.call("POST", "/v1/release", map[string]any{"client": fmt.Sprint("c", w), "lock": lock})
			mu.Lock()
			took = append(took, t1.Sub(t0), time.Since(t1))
			mu.Unlock()
		}
	})
	slices.Sort(took)
	slowest := took[len(took)-1]
	t.Logf("%d acquires and releases with a stalled reader in %s: median %s, p99 %s, slowest %s",
		len(took), time.Since(start).Round(time.Millisecond), took[len(took)/2], took[len(took)*99/100], slowest)
	// On an idle machine one takes a few milliseconds; the bound only
	// catches a committer that waits for a reader (until the stream's
	// write deadline, 30 s).
	if slowest > 10*time.Second {
		t.Errorf("the slowest operation with a stalled reader took %s", slowest)
	}

	// Now read: some events, then overflow, then the end.
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	sc := bufio.NewScanner(resp.Body)
	var kinds []string
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			kinds = append(kinds, k)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream after %d events: %v", len(kinds), err)
	}
	if len(kinds) == 0 || kinds[len(kinds)-1] != "overflow" || slices.Index(kinds, "overflow") != len(kinds)-1 {
		t.Fatalf("a stalled reader read %d events ending with %v; want overflow last, then the end of the stream", len(kinds), kinds[max(0, len(kinds)-3):])
	}
	t.Logf("the stalled reader got %d events, then overflow", len(kinds)-1)
}

// smallBuffers gives the connections it accepts small kernel buffers.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}
