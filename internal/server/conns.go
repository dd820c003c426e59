package server

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Conns guards an http.Server against clients that hold connections without
// using them (docs/deployment.md, "Connections"):
//
//   - at most Max connections are open at once; beyond, new connections
//     wait in the kernel's listen backlog (Accept is not called), while the
//     keep-alive connection idle the longest, if for over half a second, is
//     closed to make room (when none is, a connection that has sent
//     nothing);
//   - (http.Server.ReadTimeout bounds reading a request, body included,
//     and nothing after: net/http lifts the read deadline once the body is
//     read, so that a blocked acquire keeps its connection for its whole
//     wait);
//   - every write of an answer gets a write deadline of WriteTimeout, set
//     just before it, so that a client that never reads cannot keep an
//     answer in memory; a wait before the answer is not bounded by it;
//   - StopReading, at shutdown, cuts every request still being read.
//
// Use it as Configure(hs), then hs.Serve(c.Listener(ln)).
type Conns struct {
	max          int
	writeTimeout time.Duration
	log          *slog.Logger
	atCap        *LogLimiter // "at --max-connections" lines

	slots chan struct{} // one per open connection; nil without a cap

	mu       sync.Mutex
	open     map[net.Conn]*connInfo // by the conn http.Server has
	stopping bool
}

// ConnOptions configure Conns.
type ConnOptions struct {
	// Max is the most connections open at once; 0 is no cap.
	Max int
	// WriteTimeout bounds each write of an answer; 0 is no bound.
	WriteTimeout time.Duration
	// Logger gets a line, at a bounded rate, when the cap is reached.
	Logger *slog.Logger
}

// reclaimAfter is how long a keep-alive connection must have been idle
// before it may be closed to make room: a client sends its next request
// soon after an answer, or leaves the connection idle for a while.
const reclaimAfter = 500 * time.Millisecond

// reclaimNewAfter is the same for a connection that has sent nothing since
// it was accepted, where the system does not tell whether bytes of it wait
// to be read (pending): longer, as a request may have arrived while the
// server was busy, but short of the 10 s that reading headers may take.
const reclaimNewAfter = 2 * time.Second

// reclaimPoll is how often Accept, at the cap, looks again for a
// connection to close.
const reclaimPoll = 100 * time.Millisecond

type connInfo struct {
	raw     net.Conn // the TCP connection under TLS: closing it never blocks
	state   http.ConnState
	since   time.Time // of state
	reading bool      // waiting for a request, or reading one (headers, body)
}

// NewConns returns connection guards for one http.Server.
func NewConns(opts ConnOptions) *Conns {
	c := &Conns{max: opts.Max, writeTimeout: opts.WriteTimeout, log: opts.Logger, open: map[net.Conn]*connInfo{}}
	if c.max > 0 {
		c.slots = make(chan struct{}, c.max)
	}
	if c.log != nil {
		c.atCap = NewLogLimiter(1.0/60, 1, nil) // a line a minute at most
	}
	return c
}

type connKey struct{}

// Configure sets hs's ConnState and ConnContext hooks and wraps its Handler.
// Call it before hs serves.
func (c *Conns) Configure(hs *http.Server) {
	hs.ConnState = c.track
	hs.ConnContext = func(ctx context.Context, conn net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, conn)
	}
	hs.Handler = c.handler(hs.Handler)
}

// track follows each connection's state, for the cap and for StopReading.
func (c *Conns) track(conn net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case http.StateNew, http.StateActive, http.StateIdle:
		info := c.open[conn]
		if info == nil {
			info = &connInfo{raw: conn}
			if u, ok := conn.(interface{ NetConn() net.Conn }); ok {
				info.raw = u.NetConn()
			}
			c.open[conn] = info
		}
		// Active fires once a request's headers are read and before its
		// handler runs, which marks the end of its body.
		info.state, info.since, info.reading = st, time.Now(), true
		if c.stopping {
			conn.SetReadDeadline(aLongTimeAgo)
		}
	default: // closed, hijacked
		delete(c.open, conn)
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// requestRead marks conn's request as read, so that StopReading leaves it
// alone. The deadline is lifted again, as net/http did when the body ended,
// in case StopReading set it in between: a read deadline that passes after
// the body cancels the request's context, and a blocked acquire would lose
// its answer.
func (c *Conns) requestRead(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if info := c.open[conn]; info != nil {
		info.reading = false
	}
	conn.SetReadDeadline(time.Time{})
}

// StopReading cuts every request still being read, and every connection
// waiting for one, for a shutdown that must not wait for slow clients:
// their reads fail at once. Requests already read (a blocked acquire, an
// operation being committed) go on. Connections that start reading later
// are cut as they do. Call it after http.Server.Shutdown has begun, and
// again now and then while it runs: net/http sets a fresh deadline on a
// connection as it starts reading a request.
func (c *Conns) StopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	for conn, info := range c.open {
		if info.reading {
			conn.SetReadDeadline(aLongTimeAgo)
		}
	}
}

// Max returns the cap on open connections, 0 for none.
func (c *Conns) Max() int { return c.max }

// Open returns how many connections are open.
func (c *Conns) Open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.open)
}

// reclaim closes the connection that has waited longest for a request: a
// keep-alive connection idle for over reclaimAfter, or when there is none,
// one that has sent nothing since it was accepted (reclaimAfter too where
// the system tells that no byte of it waits to be read, reclaimNewAfter
// elsewhere). It reports whether it closed one.
func (c *Conns) reclaim() bool {
	now := time.Now()
	c.mu.Lock()
	var idle, fresh []*connInfo
	for _, info := range c.open {
		if !info.reading || now.Sub(info.since) <= reclaimAfter {
			continue
		}
		switch info.state {
		case http.StateIdle:
			idle = append(idle, info)
		case http.StateNew:
			fresh = append(fresh, info)
		}
	}
	// An idle keep-alive connection may already carry the start of its
	// next request (net/http reads it before the state changes), and a
	// new one a TLS handshake: only one that has read nothing since its
	// state began, and has nothing waiting, is cut.
	var victim *connInfo
	for _, group := range [][]*connInfo{idle, fresh} {
		slices.SortFunc(group, func(a, b *connInfo) int { return a.since.Compare(b.since) })
		for _, info := range group {
			if quiet(info, now) {
				victim = info
				break
			}
		}
		if victim != nil {
			break
		}
	}
	if victim != nil {
		victim.reading = false // not picked again while net/http notices
	}
	c.mu.Unlock()
	if victim == nil {
		return false
	}
	victim.raw.Close()
	return true
}

// quiet reports whether info's connection has read nothing since its state
// began and has nothing waiting to be read.
func quiet(info *connInfo, now time.Time) bool {
	conn := info.raw
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if l, ok := conn.(*limitedConn); ok && l.readSince(info.since) {
		return false
	}
	return silent(conn, now.Sub(info.since))
}

// silent reports whether a connection accepted waited ago, from which the
// server has read nothing, is to be taken for one that sends nothing: a
// request that arrived while the server was busy is not cut.
func silent(conn net.Conn, waited time.Duration) bool {
	if l, ok := conn.(*limitedConn); ok {
		conn = l.Conn
	}
	if has, known := pending(conn); known {
		return !has
	}
	return waited > reclaimNewAfter
}

// Listener returns ln with the cap on open connections: Accept waits while
// Max are open (a connection counts until it is closed).
func (c *Conns) Listener(ln net.Listener) net.Listener {
	if c.slots == nil {
		return ln
	}
	return &limitListener{Listener: ln, c: c, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	c         *Conns
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.acquire() {
		return nil, net.ErrClosed
	}
	conn, err := l.Listener.Accept()
	if err != nil {
		<-l.c.slots
		return nil, err
	}
	return &limitedConn{Conn: conn, slots: l.c.slots}, nil
}

// acquire takes a slot for the next connection, closing a connection that
// waits for a request to make room when none is free.
func (l *limitListener) acquire() bool {
	warned := false
	for {
		select {
		case l.c.slots <- struct{}{}:
			return true
		case <-l.done:
			return false
		default:
		}
		if !warned && l.c.atCap != nil {
			warned = true
			if l.c.atCap.Allow() {
				l.c.log.Warn("at --max-connections: new connections wait; idle ones are closed to make room", "max", l.c.max)
			}
		}
		if l.c.reclaim() {
			continue // closing it freed its slot
		}
		t := time.NewTimer(reclaimPoll)
		select {
		case l.c.slots <- struct{}{}:
			t.Stop()
			return true
		case <-l.done:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn frees its slot when it is closed, once, and remembers when
// it last read a byte, so that reclaim never cuts a request under way.
type limitedConn struct {
	net.Conn
	slots    chan struct{}
	once     sync.Once
	lastRead atomic.Int64 // Unix nanoseconds
}

func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// readSince reports whether the connection read a byte after t.
func (c *limitedConn) readSince(t time.Time) bool { return c.lastRead.Load() > t.UnixNano() }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.slots })
	return err
}

// handler lifts the read deadline once a request is read and sets the
// write deadline before each write.
func (c *Conns) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			if r.Body == nil || r.Body == http.NoBody {
				c.requestRead(conn)
			} else {
				r.Body = &eofBody{ReadCloser: r.Body, read: func() { c.requestRead(conn) }}
			}
		}
		if c.writeTimeout > 0 {
			w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: c.writeTimeout}
		}
		h.ServeHTTP(w, r)
	})
}

// eofBody calls read when the body has been read to its end.
type eofBody struct {
	io.ReadCloser
	read func()
	once sync.Once
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.read)
	}
	return n, err
}

// deadlineWriter sets the connection's write deadline before each write:
// a write that the client does not take within d fails, and the
// connection is closed. net/http clears the deadline after each answer.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(status int) {
	w.extend()
	w.ResponseWriter.WriteHeader(status)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// FlushError lets http.ResponseController flush through it, for streams.
func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { w.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
