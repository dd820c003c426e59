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

	lk "github.com/leasekeeper/leasekeeper"
)

// Conns guards an http.Server against clients that hold connections without
// using them (docs/deployment.md, "Connections"):
//
//   - a request's line and headers must all arrive within HeaderTimeout of
//     its first byte, or the connection is closed (net/http's own
//     ReadHeaderTimeout starts only once 4 bytes of a request are in, so
//     that a client sending 2 would hold its connection for the whole idle
//     timeout);
//   - at most Max connections are open at once; beyond, new connections
//     wait in the kernel's listen backlog (Accept is not called), while a
//     connection that has not sent a complete set of headers is closed to
//     make room: the keep-alive connection idle the longest, if for over
//     half a second, else one that has sent nothing, else the one whose
//     headers began the longest ago, if over half a second ago; a request
//     whose headers are in keeps its place;
//   - past the cap, a few more connections (ProbeSlots) are accepted once
//     nothing could be closed for a second; on those, only GET /v1/health
//     and /v1/ready are served, the rest answered 503, so that a server
//     full of requests under way still answers its load balancer;
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
	max           int
	writeTimeout  time.Duration
	headerTimeout time.Duration
	log           *slog.Logger
	atCap         *LogLimiter // "at --max-connections" lines

	slots  chan struct{} // one per open connection; nil without a cap
	probes chan struct{} // the probe slots past the cap; nil without a cap

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
	// HeaderTimeout bounds reading a request's line and headers, from its
	// first byte (on a connection from Listener); 0 is no bound.
	HeaderTimeout time.Duration
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

// probeAfter is how long Accept, at the cap, must have found nothing to
// close before it takes a probe slot: a connection accepted on one may be
// an ordinary request, which is answered 503, where a wait of a moment
// would have got it a slot.
const probeAfter = time.Second

// ProbeSlots is how many connections past the cap serve only health and
// readiness probes.
const ProbeSlots = 4

// reclaimPoll is how often Accept, at the cap, looks again for a
// connection to close.
const reclaimPoll = 100 * time.Millisecond

type connInfo struct {
	raw     net.Conn     // the TCP connection under TLS: closing it never blocks
	lc      *limitedConn // raw, when it came from Listener
	state   http.ConnState
	since   time.Time // of state
	reading bool      // waiting for a request, or reading one (headers, body)
	begun   time.Time // reclaim's: when its partial headers began
}

// NewConns returns connection guards for one http.Server.
func NewConns(opts ConnOptions) *Conns {
	c := &Conns{max: opts.Max, writeTimeout: opts.WriteTimeout, headerTimeout: opts.HeaderTimeout, log: opts.Logger, open: map[net.Conn]*connInfo{}}
	if c.max > 0 {
		c.slots = make(chan struct{}, c.max)
		c.probes = make(chan struct{}, ProbeSlots)
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
			info.lc, _ = info.raw.(*limitedConn)
			c.open[conn] = info
		}
		// Active fires once a request's headers are read and before its
		// handler runs, which marks the end of its body.
		info.state, info.since, info.reading = st, time.Now(), true
		if info.lc != nil {
			info.lc.headers(st == http.StateActive)
		}
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
		if info.lc != nil {
			info.lc.bodyRead()
		}
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

// reclaim closes a connection that has not sent a complete set of headers,
// to make room: the keep-alive connection idle the longest, for over
// reclaimAfter, or when there is none, one that has sent nothing since it
// was accepted (reclaimAfter too where the system tells that no byte of it
// waits to be read, reclaimNewAfter elsewhere), or when there is none
// either, the one whose headers began the longest ago, over reclaimAfter
// ago: a client sends a request's headers at once, so one that has sent
// part of them for that long is holding its connection. A request whose
// headers are in is never closed. It reports whether it closed one.
//
// waiting tells whether a connection waits to be accepted: a connection
// whose headers are late is closed only for one.
func (c *Conns) reclaim(waiting func() bool) bool {
	now := time.Now()
	c.mu.Lock()
	var idle, fresh, partial []*connInfo
	for _, info := range c.open {
		if !info.reading || info.state == http.StateActive {
			continue
		}
		if info.lc != nil {
			if begun := info.lc.headersBegun(); !begun.IsZero() {
				if now.Sub(begun) > reclaimAfter {
					info.begun = begun
					partial = append(partial, info)
				}
				continue
			}
		}
		if now.Sub(info.since) <= reclaimAfter {
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
	if victim == nil && len(partial) > 0 && waiting() {
		victim = slices.MinFunc(partial, func(a, b *connInfo) int { return a.begun.Compare(b.begun) })
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

// Listener returns ln with the cap on open connections (Accept waits while
// Max are open, a connection counting until it is closed) and the header
// deadline.
func (c *Conns) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, c: c, done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	c         *Conns
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	slots, ok := l.acquire()
	if !ok {
		return nil, net.ErrClosed
	}
	conn, err := l.Listener.Accept()
	if err != nil {
		if slots != nil {
			<-slots
		}
		return nil, err
	}
	lc := &limitedConn{Conn: conn, slots: slots, probeOnly: slots != nil && slots == l.c.probes, headerTimeout: l.c.headerTimeout}
	lc.headers(false)
	return lc, nil
}

// acquire takes a slot for the next connection, closing a connection that
// waits for a request to make room when none is free, or past probeAfter, a
// probe slot. It returns the channel the slot is in, nil without a cap.
func (l *limitListener) acquire() (chan struct{}, bool) {
	if l.c.slots == nil {
		select {
		case <-l.done:
			return nil, false
		default:
			return nil, true
		}
	}
	warned := false
	var full time.Time
	for {
		select {
		case l.c.slots <- struct{}{}:
			return l.c.slots, true
		case <-l.done:
			return nil, false
		default:
		}
		if !warned && l.c.atCap != nil {
			warned = true
			if l.c.atCap.Allow() {
				l.c.log.Warn("at --max-connections: new connections wait; connections without a complete request are closed to make room", "max", l.c.max)
			}
		}
		if l.c.reclaim(l.backlogged) {
			full = time.Time{}
			continue // closing it freed its slot
		}
		if full.IsZero() {
			full = time.Now()
		} else if time.Since(full) >= probeAfter {
			select {
			case l.c.probes <- struct{}{}:
				return l.c.probes, true
			default:
			}
		}
		t := time.NewTimer(reclaimPoll)
		select {
		case l.c.slots <- struct{}{}:
			t.Stop()
			return l.c.slots, true
		case <-l.done:
			t.Stop()
			return nil, false
		case <-t.C:
		}
	}
}

// backlogged reports whether a connection waits to be accepted, true when
// the system does not tell.
func (l *limitListener) backlogged() bool {
	has, known := backlogged(l.Listener)
	return has || !known
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn frees its slot when it is closed, once; remembers when it
// last read a byte, so that reclaim never cuts a request under way; and
// closes itself when a request's headers, begun, are not all in within
// headerTimeout.
type limitedConn struct {
	net.Conn
	slots         chan struct{} // nil without a cap
	probeOnly     bool          // on a probe slot: health and readiness only
	headerTimeout time.Duration
	once          sync.Once
	lastRead      atomic.Int64 // Unix nanoseconds

	mu       sync.Mutex
	awaiting bool      // no complete set of headers since the last request
	begun    time.Time // the first byte read of the headers awaited; zero before
	bodyDone int64     // lastRead when the last request's body was read
	gen      int       // of the headers awaited, for a timer that fires late
	timer    *time.Timer
}

func (c *limitedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		now := time.Now()
		c.lastRead.Store(now.UnixNano())
		c.mu.Lock()
		if c.awaiting && c.begun.IsZero() {
			c.begin(now)
		}
		c.mu.Unlock()
	}
	return n, err
}

// begin starts the header deadline. c.mu is held.
func (c *limitedConn) begin(now time.Time) {
	c.begun = now
	if c.headerTimeout > 0 {
		gen := c.gen
		c.timer = time.AfterFunc(c.headerTimeout, func() {
			c.mu.Lock()
			late := c.gen == gen && c.awaiting
			c.mu.Unlock()
			if late {
				c.Conn.Close() // net/http's read fails, and it closes c
			}
		})
	}
}

// headers marks the start (in false) or the end (in true) of a wait for a
// request's headers. A byte read after the last body but before the wait
// (net/http reads one while a handler runs, to notice a client leaving)
// was the start of these headers.
func (c *limitedConn) headers(in bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.begun = time.Time{}
	c.awaiting = !in
	if !in && c.lastRead.Load() > c.bodyDone && c.bodyDone != 0 {
		c.begin(time.Now())
	}
}

// bodyRead notes that the request's body has been read.
func (c *limitedConn) bodyRead() {
	c.mu.Lock()
	c.bodyDone = c.lastRead.Load()
	c.mu.Unlock()
}

// headersBegun returns when the headers awaited began arriving; zero when
// none is awaited or no byte of them has come.
func (c *limitedConn) headersBegun() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.awaiting {
		return time.Time{}
	}
	return c.begun
}

// readSince reports whether the connection read a byte after t.
func (c *limitedConn) readSince(t time.Time) bool { return c.lastRead.Load() > t.UnixNano() }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.slots != nil {
			<-c.slots
		}
	})
	return err
}

// tcpConn returns the TCP connection under conn, as http.Server has it;
// nil when there is none.
func tcpConn(conn net.Conn) *net.TCPConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if lc, ok := conn.(*limitedConn); ok {
		conn = lc.Conn
	}
	tc, _ := conn.(*net.TCPConn)
	return tc
}

// probeOnly reports whether conn, as http.Server has it, is on a probe
// slot.
func probeOnly(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	lc, ok := conn.(*limitedConn)
	return ok && lc.probeOnly
}

// handler lifts the read deadline once a request is read and sets the
// write deadline before each write.
func (c *Conns) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, ok := r.Context().Value(connKey{}).(net.Conn); ok {
			probe := (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/v1/health" || r.URL.Path == "/v1/ready")
			if probeOnly(conn) && !probe {
				refuse(w, lk.Errorf(lk.CodeUnavailable, "the server is at its connection cap (--max-connections): this connection serves health and readiness probes only; retry"))
				return
			}
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
