package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Proxy is a TCP proxy on the loopback interface between one server and
// its PostgreSQL database, for the faults of the network between them:
// Cut drops every connection at once and refuses new ones until Restore,
// as a partition or a database restart would; Delay holds every chunk of
// bytes, each way, for a while, as a slow network would. Methods are safe
// for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	// note, when set, records each fault (the Cluster notes it in its
	// History against the server behind the proxy).
	note func(kind string)

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of every forwarded connection
	cut    bool
	delay  time.Duration
	closed bool
	wg     sync.WaitGroup
}

// newProxy listens on 127.0.0.1 on a free port and forwards every
// connection to target (host:port).
func newProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// addr is the proxy's host:port, to connect to instead of the target.
func (p *Proxy) addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy now, both ends, and
// refuses new ones until Restore: a connection attempt is accepted and
// closed at once, which a client sees as a reset at its first read, at
// once rather than after a timeout.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.noteFault("cut-db")
	for c := range conns {
		c.Close()
	}
}

// Restore lets new connections through again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
	p.noteFault("restore-db")
}

// Delay makes every chunk of bytes read from either end wait d before it
// is passed on, from now on (0 removes the delay): a latency, not a
// bandwidth limit, so a round trip to the database takes 2d longer.
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
	p.noteFault(fmt.Sprintf("delay-db %v", d))
}

// close stops listening and closes every connection: the Cluster's
// cleanup.
func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) noteFault(kind string) {
	if p.note != nil {
		p.note(kind)
	}
}

func (p *Proxy) currentDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

// track adds c to the connections Cut closes, unless the proxy is cut or
// closed, in which case it closes c and reports false.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !p.track(c) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				p.untrack(c)
				return
			}
			// Cut may have come during the dial: track closes up then.
			if !p.track(up) {
				p.untrack(c)
				return
			}
			var both sync.WaitGroup
			both.Go(func() { p.pipe(up, c) })
			both.Go(func() { p.pipe(c, up) })
			both.Wait()
			p.untrack(c, up)
		}()
	}
}

// pipe copies src to dst, each chunk after the delay in force when it was
// read, until either end fails; then it closes both, so that the other
// direction ends too.
func (p *Proxy) pipe(dst, src net.Conn) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	// A queue, so that a delay holds each chunk for d from its arrival
	// rather than adding up over the chunks behind it.
	q := make(chan chunk, 256)
	go func() {
		defer close(q)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				q <- chunk{b[:n], time.Now().Add(p.currentDelay())}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for c := range q {
		if failed {
			continue // drained, so that the reader never blocks on q
		}
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			src.Close()
		}
	}
	dst.Close()
	src.Close()
}

// proxiedDSN returns dsn, a PostgreSQL URL, pointed at a new proxy to the
// host and port it names.
func proxiedDSN(dsn string) (string, *Proxy, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", nil, err
	}
	if len(cfg.Host) > 0 && cfg.Host[0] == '/' {
		return "", nil, fmt.Errorf("a proxy needs a TCP host, not the socket in %s", cfg.Host)
	}
	for _, f := range cfg.Fallbacks {
		// sslmode=prefer falls back to the same host without TLS: fine.
		if f.Host != cfg.Host || f.Port != cfg.Port {
			return "", nil, fmt.Errorf("a proxy needs a single host, not several")
		}
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("a proxy needs a postgres:// URL")
	}
	p, err := newProxy(net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
	if err != nil {
		return "", nil, err
	}
	u.Host = p.addr()
	return u.String(), p, nil
}

// proxies puts a proxy before each server of c (Options.ProxyPostgres),
// each noting its faults against its server.
func (c *Cluster) proxies(t testing.TB) {
	t.Helper()
	if !c.opts.Postgres {
		t.Fatal("e2e: ProxyPostgres needs Postgres")
	}
	for _, s := range c.Servers {
		dsn, p, err := proxiedDSN(c.db)
		if err != nil {
			t.Fatalf("e2e: a proxy to PostgreSQL: %v", err)
		}
		p.note = func(kind string) { c.fault(kind, s, 0) }
		s.db, s.proxy = dsn, p
		t.Cleanup(p.close)
	}
}

// Proxy is the proxy between the server and PostgreSQL, nil unless the
// cluster has Options.ProxyPostgres.
func (s *Server) Proxy() *Proxy { return s.proxy }
