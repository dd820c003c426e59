package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/report"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// Options configure a Cluster.
type Options struct {
	// Servers is how many serve processes share the database; 0 means 1.
	// More than one needs Postgres.
	Servers int
	// Postgres runs the servers on a fresh PostgreSQL schema (pgtest.DSN,
	// which skips or fails the test as LEASEKEEPER_TEST_POSTGRES says)
	// instead of a SQLite file.
	Postgres bool
	// Args are more flags for every serve.
	Args []string
	// Failpoints are enabled in every server (internal/failpoint). The
	// binary has them only in a test built with -tags failpoints; Start
	// fails the test otherwise.
	Failpoints []string
	// History, when set, gets a Fault for everything done to a server
	// (SetHistory changes it).
	History *history.History
	// Binary is the leasekeeper binary to run; default Binary's, built
	// from this module.
	Binary string
	// Dir holds the cluster's files; default t.ArtifactDir().
	Dir string
	// DB is every server's --db as it is: a SQLite file, or the URL of a
	// PostgreSQL schema the caller made (set Postgres too). Default: a new
	// file in Dir, or pgtest's fresh schema.
	DB string
	// ProxyPostgres puts a Proxy between each server and PostgreSQL
	// (Server.Proxy), for cutting or slowing its connections. It needs
	// Postgres.
	ProxyPostgres bool
	// Standby runs the servers on a PostgreSQL primary and a synchronous
	// standby of the cluster's own (.ci/postgres), both hosts in every
	// server's --db, for Cluster.CrashPrimary and Cluster.Promote. It
	// needs Postgres.
	Standby bool
}

// Cluster is a set of `leasekeeper serve` processes on one database. Its
// methods fail the test on error. Everything is stopped, and each server's
// standard error (its log and audit log) shown when the test failed, by
// t.Cleanup.
type Cluster struct {
	t       testing.TB
	bin     string
	dir     string // the database file, the ready files, the logs
	db      string // --db
	opts    Options
	hmu     sync.Mutex // guards opts.History (SetHistory)
	pg      *pgPair    // Options.Standby's databases
	Servers []*Server
}

// Start builds the binary (once per process), starts the servers and
// waits until every one is ready.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Servers == 0 {
		opts.Servers = 1
	}
	if opts.Servers > 1 && !opts.Postgres {
		t.Fatalf("e2e: %d servers need PostgreSQL: a SQLite file has one server", opts.Servers)
	}
	if len(opts.Failpoints) > 0 && !failpoint.Compiled {
		t.Fatalf("e2e: failpoints %v need a test built with -tags failpoints", opts.Failpoints)
	}
	// The artifact directory: kept with go test -artifacts, for reading a
	// failed run's logs and database; a temporary directory otherwise.
	c := &Cluster{t: t, bin: opts.Binary, dir: opts.Dir, opts: opts}
	if c.bin == "" {
		c.bin = Binary(t)
	}
	if c.dir == "" {
		c.dir = t.ArtifactDir()
	}
	if opts.DB != "" {
		c.db = opts.DB
	} else if opts.Standby {
		c.db = c.startStandby(t)
	} else if opts.Postgres {
		c.db = pgtest.DSN(t)
	} else {
		c.db = filepath.Join(c.dir, "leasekeeper.db")
	}
	for i := range opts.Servers {
		c.Servers = append(c.Servers, &Server{c: c, index: i, db: c.db})
	}
	t.Cleanup(c.cleanup)
	c.noteAnswerSettle(opts.History)
	if opts.ProxyPostgres {
		c.proxies(t)
	}
	for _, s := range c.Servers {
		s.Start()
	}
	return c
}

// Endpoint is a server as an operation is sent to it.
type Endpoint struct {
	Server      int    // its index
	Incarnation int    // its start number
	URL         string // its base URL
}

// Target picks the server an operation goes to.
type Target func() Endpoint

// Target returns a Target that spreads operations over the servers in
// turn, skipping none: an operation sent to a server that is down is an
// unknown outcome, as it would be for a real client.
func (c *Cluster) Target(first int) Target {
	var mu sync.Mutex
	next := first
	return func() Endpoint {
		mu.Lock()
		i := next % len(c.Servers)
		next++
		mu.Unlock()
		return c.Servers[i].Endpoint()
	}
}

// settle is how long after a server process is gone its transactions may
// still commit (Fault.Settled): none on SQLite, whose commits the process
// makes itself; on PostgreSQL, a COMMIT the database received just before
// is still carried out, at once or once a synchronous standby (Standby)
// has it; a second is ample.
func (c *Cluster) settle() time.Duration {
	if c.opts.Postgres {
		return time.Second
	}
	return 0
}

// noteAnswerSettle tells h how long after a 5xx answer an operation may
// still take effect (History.SetAnswerSettle): settle, as for a kill. Not
// with a standby: a commit the primary had sent it when it crashed comes
// back at the promotion, which the outage's own bound allows for.
func (c *Cluster) noteAnswerSettle(h *history.History) {
	if h != nil && !c.opts.Standby {
		h.SetAnswerSettle(c.settle())
	}
}

func (c *Cluster) fault(kind string, s *Server, settle time.Duration) {
	c.hmu.Lock()
	h := c.opts.History
	c.hmu.Unlock()
	if h != nil {
		s.mu.Lock()
		n := s.starts
		s.mu.Unlock()
		h.Fault(kind, s.index, n, settle)
	}
}

func (c *Cluster) cleanup() {
	for _, s := range c.Servers {
		s.kill(false)
	}
	if !c.t.Failed() {
		return
	}
	for _, s := range c.Servers {
		for _, path := range s.Logs() {
			c.t.Logf("e2e: the end of %s:\n%s", path, report.Tail(path, 40))
		}
	}
}

// Server is one serve process of a Cluster, started again and again on the
// same address when it can (clients keep their URL across a restart).
type Server struct {
	c     *Cluster
	index int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process is gone
	addr   string        // host:port, kept across restarts
	starts int
	logs   []string
	paused bool
	db     string // --db: the cluster's, or its proxy's (Options.ProxyPostgres)
	proxy  *Proxy
}

// Index is the server's place in Cluster.Servers.
func (s *Server) Index() int { return s.index }

// URL is the server's base URL; it stays the same across restarts unless
// its port was taken meanwhile.
func (s *Server) URL() string { return s.Endpoint().URL }

// Endpoint is the server as an operation sent now reaches it.
func (s *Server) Endpoint() Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Endpoint{Server: s.index, Incarnation: s.starts, URL: s.c.scheme() + "://" + s.addr}
}

// Logs are the files holding the standard error of each start, oldest
// first.
func (s *Server) Logs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.logs...)
}

// Pid is the current process's id, 0 when none runs.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Start starts the server and waits until it is ready: its --ready-file
// written, then GET /v1/ready answering 200. No log line is read.
func (s *Server) Start() {
	s.c.t.Helper()
	if err := s.start(); err != nil {
		s.c.t.Fatalf("e2e: server %d: %v", s.index, err)
	}
	s.c.fault("start", s, 0)
}

func (s *Server) start() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return fmt.Errorf("already running")
	}
	s.starts++
	n, addr := s.starts, s.addr
	s.mu.Unlock()
	err := s.launch(n, addr)
	if err != nil && addr != "" && strings.Contains(err.Error(), "address already in use") {
		// Someone took the port while the server was down: a new one.
		err = s.launch(n, "")
	}
	return err
}

// launch runs serve (start number n) on addr, or a free port when addr is
// "", and waits for it to be ready.
func (s *Server) launch(n int, addr string) error {
	listen := addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	readyFile := filepath.Join(s.c.dir, fmt.Sprintf("server-%d.addr", s.index))
	os.Remove(readyFile)
	logPath := filepath.Join(s.c.dir, fmt.Sprintf("server-%d.%d.log", s.index, n))
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := append([]string{"serve", "--db", s.db, "--listen", listen, "--ready-file", readyFile}, s.c.opts.Args...)
	cmd := exec.Command(s.c.bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = os.Environ()
	if len(s.c.opts.Failpoints) > 0 {
		cmd.Env = append(cmd.Env, failpoint.EnvVar+"="+strings.Join(s.c.opts.Failpoints, ","))
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.paused = cmd, exited, false
	s.logs = append(s.logs, logPath)
	s.mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(readyFile)
		if a := strings.TrimSpace(string(b)); err == nil && a != "" {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return fmt.Errorf("--ready-file holds %q: %v", b, err)
			}
			addr = a
			break
		}
		select {
		case <-exited:
			s.forget(cmd)
			return fmt.Errorf("serve exited before it was ready:\n%s", report.Tail(logPath, 40))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no --ready-file within 30 s:\n%s", report.Tail(logPath, 40))
		}
	}
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
	hc := &http.Client{Timeout: 3 * time.Second, Transport: s.c.probe()}
	var last error
	for {
		resp, err := hc.Get(s.c.scheme() + "://" + addr + "/v1/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		select {
		case <-exited:
			s.forget(cmd)
			return fmt.Errorf("serve exited before it was ready:\n%s", report.Tail(logPath, 40))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /v1/ready did not answer 200 within 30 s (last: %v):\n%s", last, report.Tail(logPath, 40))
		}
	}
}

// forget drops cmd, gone, as the current process.
func (s *Server) forget(cmd *exec.Cmd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == cmd {
		s.cmd, s.exited = nil, nil
	}
}

// current returns the running process and its exit channel, or nil.
func (s *Server) current() (*exec.Cmd, chan struct{}, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited, s.paused
}

// Kill ends the server with SIGKILL (kill -9) and waits for it to be gone.
func (s *Server) Kill() {
	s.c.t.Helper()
	if err := s.kill(true); err != nil {
		s.c.t.Fatalf("e2e: server %d: %v", s.index, err)
	}
}

func (s *Server) kill(note bool) error {
	cmd, exited, _ := s.current()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d still running 10 s after SIGKILL", cmd.Process.Pid)
	}
	// Noted once the process is gone: Fault.Settled counts from there.
	if note {
		s.c.fault("kill", s, s.c.settle())
	}
	s.forget(cmd)
	return nil
}

// Stop ends the server with SIGTERM, a graceful stop, and waits for it to
// be gone; it fails the test if it takes more than 30 s.
func (s *Server) Stop() {
	s.c.t.Helper()
	cmd, exited, paused := s.current()
	if cmd == nil {
		return
	}
	s.c.fault("stop", s, 0)
	cmd.Process.Signal(syscall.SIGTERM)
	if paused {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		s.c.t.Fatalf("e2e: server %d did not stop within 30 s of SIGTERM", s.index)
	}
	s.forget(cmd)
}

// Pause stops the process with SIGSTOP and waits until every thread of it
// is stopped: it answers nothing, and holds its connections and, on
// PostgreSQL, any transaction it had open.
func (s *Server) Pause() {
	s.c.t.Helper()
	s.signal("pause", syscall.SIGSTOP, true)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.c.t.Helper()
	s.signal("resume", syscall.SIGCONT, false)
}

func (s *Server) signal(kind string, sig syscall.Signal, paused bool) {
	s.c.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	if cmd != nil {
		s.paused = paused
	}
	s.mu.Unlock()
	if cmd == nil {
		s.c.t.Fatalf("e2e: %s of server %d, which is not running", kind, s.index)
	}
	s.c.fault(kind, s, 0)
	if err := cmd.Process.Signal(sig); err != nil {
		s.c.t.Fatalf("e2e: %s of server %d: %v", kind, s.index, err)
	}
	if !waitStopped(cmd.Process.Pid, paused, 10*time.Second) {
		s.c.t.Fatalf("e2e: %s of server %d: its threads did not follow within 10 s", kind, s.index)
	}
}

// Ready asks GET /v1/ready once and reports whether it answered 200.
func (s *Server) Ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/v1/ready", nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: s.c.probe()}).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
