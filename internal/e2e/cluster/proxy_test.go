package cluster

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestProxy: the proxy passes bytes both ways; Cut breaks the connections
// it carries and refuses new ones until Restore; Delay holds each chunk.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server, a line at a time
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	p, err := newProxy(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	dial := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", p.addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	echo := func(c net.Conn, r *bufio.Reader) (time.Duration, error) {
		start := time.Now()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return 0, err
		}
		line, err := r.ReadString('\n')
		if err == nil && line != "ping\n" {
			t.Errorf("echo %q", line)
		}
		return time.Since(start), err
	}

	c, r := dial()
	if _, err := echo(c, r); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if _, err := echo(c, r); err == nil {
		t.Error("a connection carried through a Cut still works")
	}
	if _, err := echo(dial()); err == nil {
		t.Error("a new connection works while cut")
	}
	p.Restore()
	c, r = dial()
	if _, err := echo(c, r); err != nil {
		t.Fatalf("after Restore: %v", err)
	}
	// Margins wide enough for a loaded machine's scheduling.
	p.Delay(300 * time.Millisecond)
	if d, err := echo(c, r); err != nil || d < 600*time.Millisecond {
		t.Errorf("delayed 300 ms each way: a round trip took %v (%v), want 600 ms or more", d, err)
	}
	p.Delay(0)
	if d, err := echo(c, r); err != nil || d > 500*time.Millisecond {
		t.Errorf("undelayed: a round trip took %v (%v)", d, err)
	}
}
