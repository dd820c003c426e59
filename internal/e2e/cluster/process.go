package cluster

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

// What a test of the serve command itself needs from a Server beyond the
// faults: TLS, the log of a start, a signal of its choosing and the exit
// status (cmd/leasekeeper's binary tests start serve with a Cluster).

// scheme is the servers' URL scheme: https when Options.Args give serve a
// certificate (--tls-cert), as serve then speaks only TLS.
func (c *Cluster) scheme() string {
	for _, a := range c.opts.Args {
		if a == "--tls-cert" || strings.HasPrefix(a, "--tls-cert=") {
			return "https"
		}
	}
	return "http"
}

// insecureProbe does not verify the server's certificate. The harness asks
// only whether a server is up (GET /v1/ready); whether its certificate is
// the right one is for the test that set up the TLS to check, with its own
// CA, as a real client would, so the Cluster needs no CA of its own.
var insecureProbe = &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
	DisableKeepAlives: true,
}

// probe is the transport of the harness's own requests to the servers.
func (c *Cluster) probe() http.RoundTripper {
	if c.scheme() == "https" {
		return insecureProbe
	}
	return http.DefaultTransport
}

// Log returns what the current start of the server (the last one once it
// is gone) has written so far to its standard error and output: its log,
// and its audit log unless --audit-log sends that elsewhere.
func (s *Server) Log() string {
	s.mu.Lock()
	var path string
	if len(s.logs) > 0 {
		path = s.logs[len(s.logs)-1]
	}
	s.mu.Unlock()
	if path == "" {
		s.c.t.Errorf("e2e: server %d has no log: it was never started", s.index)
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		s.c.t.Errorf("e2e: server %d: %v", s.index, err)
	}
	return string(b)
}

// Signal sends sig to the running server and returns at once, for a test
// of how serve takes a signal: Wait then tells when it exited and how. A
// SIGTERM is noted in the History as a "stop", like Stop's, anything else
// as "signal NAME"; Kill, Pause and Resume are the ways to send SIGKILL,
// SIGSTOP and SIGCONT with their waits and notes.
func (s *Server) Signal(sig syscall.Signal) {
	s.c.t.Helper()
	cmd, _, _ := s.current()
	if cmd == nil {
		s.c.t.Fatalf("e2e: %v to server %d, which is not running", sig, s.index)
	}
	kind := "signal " + sig.String()
	if sig == syscall.SIGTERM {
		kind = "stop"
	}
	s.c.fault(kind, s, 0)
	if err := cmd.Process.Signal(sig); err != nil {
		s.c.t.Fatalf("e2e: %v to server %d: %v", sig, s.index, err)
	}
}

// Wait waits up to timeout for the server's process to exit, however it
// ends, and returns its exit status: -1 when a signal ended it. Once it
// has, the server can be started again. An error says that no process
// runs, or that it still ran after timeout (it is left running).
func (s *Server) Wait(timeout time.Duration) (exitCode int, err error) {
	cmd, exited, _ := s.current()
	if cmd == nil {
		return 0, fmt.Errorf("e2e: server %d is not running", s.index)
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		return 0, fmt.Errorf("e2e: server %d (pid %d) still ran after %v", s.index, cmd.Process.Pid, timeout)
	}
	s.forget(cmd)
	return cmd.ProcessState.ExitCode(), nil
}
