package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// Two `leasekeeper serve` processes on one PostgreSQL database, as behind a
// load balancer: every transaction of either server first locks the one
// service row, so the database runs them one at a time, and each server hears
// of the other's grants through LISTEN/NOTIFY. Many clients drive both at once,
// each choosing a server at random per request, so that a lease granted through
// one server is written under, renewed, released or left to lapse through the
// other, and an acquire blocked on one is woken by a grant the other made.
//
// What the tests check holds for any timing (the seed is logged, but the
// timing of a run cannot be replayed):
//
//   - exclusion: a lock never has an exclusive holder beside another holder.
//     Judged on snapshots of the tables taken straight from PostgreSQL during
//     the load (one statement each, so each is one committed state), on
//     /v1/locks of either server, on the lease intervals that the two audit
//     logs give once merged, and on acknowledged releases against
//     acknowledged grants (wall-clock order, finer than the audit's seconds);
//   - tokens: each (lock, token) is granted once across both servers, tokens
//     run 1, 2, 3, ... in grant order, and a grant acknowledged before another
//     was asked for has the lower token;
//   - the fenced store: no acknowledged write is lost or overtaken by a lower
//     token, and every refusal as stale had a higher token to point to;
//   - lapses: a lease left to lapse is retired once, at its expires_at, by
//     either server, and a queue grant starts at the instant something on its
//     lock ended (L3).
//
// Server time is the database's clock in whole seconds. The checks that
// compare it with this process's clock (was a lease surely live when the
// server handled a request?) use the offset between the two, measured at the
// start, and a margin for that measurement.
const (
	msLocks     = 5
	msCommonKey = "common" // every client of a lock writes it; no client has this name
	msPollEvery = 50 * time.Millisecond
	msHTTPPoll  = 150 * time.Millisecond
)

func TestTwoServersOnePostgres(t *testing.T) {
	c := newMSCluster(t)
	run := newMSRun(t, c, msConfig{clients: 50, load: 16 * time.Second, lapseOdds: 25})

	stop := run.startLoad()
	defer stop()
	time.Sleep(run.cfg.load)
	stop()

	run.clearLocks(0)
	reads := run.readBack()
	c.stopAll()

	ck := newMSCheck(t, run, nil)
	ck.all(reads)
	if !t.Failed() {
		ck.sanity()
	}
	ck.finish()
}

// TestServerDiesMidLoad kills one of the two servers with SIGKILL in the middle
// of the load. Requests in flight to it get no answer (they may or may not have
// happened), and each client that meets the dead server moves to the survivor,
// settling first what the unanswered request may have left (a lease or a queue
// entry) with a release. The invariants of TestTwoServersOnePostgres still
// hold, the audit logs included: a server writes a transaction's lines before
// it commits it, so the killed one left no committed change without its
// lines (only, perhaps, the lines of a last transaction it never committed,
// which the checks tell by what the survivor did next). Leases granted
// through the killed server to clients that never come back ("orphans", on
// locks of their own) must still be retired at their expires_at by the
// survivor's lapse timer, handing the locks to waiters blocked on the
// survivor, after the load has stopped, when nothing else makes the survivor
// run a transaction.
func TestServerDiesMidLoad(t *testing.T) {
	const (
		orphans   = 3
		orphanTTL = 10
		waiterTTL = 5
	)
	c := newMSCluster(t)
	run := newMSRun(t, c, msConfig{clients: 20, load: 10 * time.Second, lapseOdds: 20})
	for i := range orphans {
		run.modes[[2]string{msOrphan(i), msOrphanLock(i)}] = "exclusive"
		run.modes[[2]string{msWaiter(i), msOrphanLock(i)}] = "exclusive"
	}
	dead := 1

	stop := run.startLoad()
	defer stop()
	time.Sleep(4*time.Second + time.Duration(run.rng.Int64N(int64(time.Second))))

	// The orphans take their locks through the server about to die, and
	// never come back.
	var orphanGrants []*msGrant
	for i := range orphans {
		r := c.api[dead].post(context.Background(), "/v1/acquire",
			map[string]any{"client": msOrphan(i), "lock": msOrphanLock(i), "ttl": orphanTTL})
		res, ok := crashGrantedOf(r)
		if !ok {
			t.Fatalf("orphan acquire of %s: %d %s %v %v", msOrphanLock(i), r.status, r.raw, r.err, r.bad)
		}
		orphanGrants = append(orphanGrants, &msGrant{client: msOrphan(i), lock: msOrphanLock(i), mode: "exclusive",
			ttl: orphanTTL, token: res.Token, grantedAt: res.GrantedAt, expires: res.ExpiresAt, lastExpires: res.ExpiresAt,
			server: dead, sent: r.sent, recv: r.recv})
	}

	killAt := c.kill(dead)
	t.Logf("killed server %c %v into the load", 'A'+dead, killAt.Sub(run.loadStart).Round(time.Millisecond))

	// Waiters for the orphans' locks block on the survivor; only the
	// survivor's lapse timer can end the orphans' leases.
	type waited struct {
		g   *msGrant
		err string
	}
	waiters := make([]waited, orphans)
	var wwg sync.WaitGroup
	for i := range orphans {
		wwg.Go(func() {
			r := c.api[1-dead].post(context.Background(), "/v1/acquire",
				map[string]any{"client": msWaiter(i), "lock": msOrphanLock(i), "ttl": waiterTTL, "wait": 3 * orphanTTL})
			res, ok := crashGrantedOf(r)
			if !ok {
				waiters[i].err = fmt.Sprintf("%d %s %v %v", r.status, r.raw, r.err, r.bad)
				return
			}
			waiters[i].g = &msGrant{client: msWaiter(i), lock: msOrphanLock(i), mode: "exclusive", ttl: waiterTTL,
				token: res.Token, grantedAt: res.GrantedAt, expires: res.ExpiresAt, lastExpires: res.ExpiresAt,
				server: 1 - dead, wait: 3 * orphanTTL * time.Second, sent: r.sent, recv: r.recv}
		})
	}

	time.Sleep(time.Until(run.loadStart.Add(run.cfg.load)))
	stop()
	loadDone := time.Now()
	wwg.Wait()

	ck := newMSCheck(t, run, &msKill{server: dead, at: killAt})
	for i, o := range orphanGrants {
		w := waiters[i]
		if w.g == nil {
			ck.failf("%s: the waiter blocked on the survivor got %s, not the lock the orphan %s left to lapse at %d",
				o.lock, w.err, o.client, o.expires)
			continue
		}
		g := w.g
		// The waiter's lease starts at the orphan's expires_at (L3), with the
		// next token.
		if g.token != o.token+1 || g.grantedAt != o.expires || g.expires != o.expires+waiterTTL {
			ck.failf("%s: waiter granted token %d from %d until %d; want token %d from %d until %d (the orphan's token %d lapsing at %d)",
				o.lock, g.token, g.grantedAt, g.expires, o.token+1, o.expires, o.expires+waiterTTL, o.token, o.expires)
		}
		if !c.answeredAfter(g.recv, o.expires) {
			ck.failf("%s: waiter answered at %s, before the orphan's lease ended at %d", o.lock, crashClock(g.recv), o.expires)
		}
		if late := g.recv.Add(c.offset).Sub(time.Unix(o.expires, 0)); late > 2*time.Second {
			ck.failf("%s: the orphan's lease ending at %d was retired %v late (waiter answered at %s)",
				o.lock, o.expires, late.Round(time.Millisecond), crashClock(g.recv))
		}
		if g.recv.Before(loadDone) {
			t.Logf("note: %s was handed over before the load stopped: the load, not only the lapse timer, may have retired it", o.lock)
		}
		o.lapsed = true
		run.grants = append(run.grants, o, g)
		r := c.api[1-dead].post(context.Background(), "/v1/release", map[string]any{"client": g.client, "lock": g.lock})
		g.relSent, g.relRecv, g.relBody = r.sent, r.recv, r.raw
		if r.is(lk.Released) {
			g.rel = crashAcked
		} else {
			ck.failf("%s: releasing the waiter's lease: %d %s %v %v", g.lock, r.status, r.raw, r.err, r.bad)
		}
	}

	run.clearLocks(1 - dead)
	reads := run.readBack()
	c.stopAll()

	ck.all(reads)
	for _, o := range orphanGrants {
		l := ck.leases[o.lock][o.token]
		if l != nil && l.ended && l.endServer != 1-dead {
			ck.failf("%s: the orphan's lease (token %d) was retired by server %c, not the survivor", o.lock, o.token, 'A'+l.endServer)
		}
	}
	if run.stats.transport[dead] == 0 {
		ck.failf("no request to the killed server failed: the clients never had to move to the survivor")
	}
	if !t.Failed() {
		ck.sanity()
	}
	ck.finish()
}

// --- the two servers ---

type msCluster struct {
	t     *testing.T
	dsn   string
	srv   [2]*crashServer
	audit [2]string
	api   [2]crashAPI
	// offset is the database's clock minus this process's; slack bounds the
	// error of that measurement (half a round trip) with room to spare.
	offset, slack time.Duration
	killed        [2]atomic.Bool
}

func newMSCluster(t *testing.T) *msCluster {
	bin := buildBinary(t)
	c := &msCluster{t: t, dsn: pgtest.DSN(t)}
	// The timeout is above the longest wait asked for: a request is never
	// abandoned while the server may still act on it.
	hc := crashHTTPClient(t, &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128, DisableCompression: true}, 60*time.Second)
	dir := t.TempDir()
	for i := range c.srv {
		c.audit[i] = filepath.Join(dir, fmt.Sprintf("audit-%c.jsonl", 'A'+i))
		c.srv[i] = startCrashServer(t, bin, c.dsn, "--audit-log", c.audit[i])
		c.api[i] = crashAPI{hc: hc, base: c.srv[i].base}
	}
	c.measureClock()
	return c
}

// measureClock takes the offset from the round trip with the least delay.
func (c *msCluster) measureClock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		c.t.Fatalf("connecting to the test schema: %v", err)
	}
	defer conn.Close(ctx)
	best := time.Duration(math.MaxInt64)
	for range 7 {
		start := time.Now()
		var db float64
		if err := conn.QueryRow(ctx, "SELECT extract(epoch FROM clock_timestamp())::float8").Scan(&db); err != nil {
			c.t.Fatalf("reading the database's clock: %v", err)
		}
		if rtt := time.Since(start); rtt < best {
			best = rtt
			mid := start.Add(rtt / 2)
			c.offset = time.Duration(db*1e9) - time.Duration(mid.UnixNano())
		}
	}
	c.slack = 50*time.Millisecond + best
	c.t.Logf("database clock - local clock = %v (round trip %v)", c.offset.Round(time.Microsecond), best.Round(time.Microsecond))
}

// answeredBefore: an operation answered at recv ran at a server time below e
// (server time never exceeds the database's clock).
func (c *msCluster) answeredBefore(recv time.Time, e int64) bool {
	return recv.Add(c.offset + c.slack).Before(time.Unix(e, 0))
}

// sentAfter: an operation sent at sent ran at a server time of e or later (the
// server reads the clock for it after it arrived).
func (c *msCluster) sentAfter(sent time.Time, e int64) bool {
	return !sent.Add(c.offset - c.slack).Before(time.Unix(e, 0))
}

// answeredAfter: an answer received at recv cannot predate server time e.
func (c *msCluster) answeredAfter(recv time.Time, e int64) bool {
	return !recv.Add(c.offset + c.slack).Before(time.Unix(e, 0))
}

// untilDB is how long until the database's clock reads e.
func (c *msCluster) untilDB(e int64) time.Duration {
	return time.Unix(e, 0).Sub(time.Now().Add(c.offset))
}

func (c *msCluster) kill(s int) time.Time {
	c.killed[s].Store(true)
	if err := c.srv[s].kill(); err != nil {
		c.t.Fatalf("SIGKILL server %c: %v", 'A'+s, err)
	}
	return time.Now()
}

// stopAll stops the servers still running with SIGTERM, so that their audit
// logs are complete.
func (c *msCluster) stopAll() {
	for i, p := range c.srv {
		if !c.killed[i].Load() {
			p.stop(c.t)
		}
	}
}

// --- the load ---

type msConfig struct {
	clients   int
	load      time.Duration
	lapseOdds int // one grant in lapseOdds is left to lapse
}

// msGrant is an acknowledged {"outcome": "granted", ...} and what became
// of the lease.
type msGrant struct {
	client, lock, mode string
	ttl, token         int64
	grantedAt          int64 // the lease's start, which a renew keeps
	expires            int64 // as granted
	lastExpires        int64 // after the last acknowledged renew
	renewUnknown       bool  // a renew went unanswered: lastExpires may be out of date
	server             int   // the server that answered the acquire
	wait               time.Duration
	sent, recv         time.Time
	rel                crashOutcome // the holder's own release
	relBody            string
	relSent, relRecv   time.Time
	lapsed             bool // left to lapse, and found gone after its expiry
}

func (g *msGrant) String() string {
	return fmt.Sprintf("%s %s token %d until %d (acquire on server %c answered at %s)",
		g.client, g.mode, g.token, g.lastExpires, 'A'+g.server, crashClock(g.recv))
}

// msWrite is one store write and its answer.
type msWrite struct {
	lock, key, value string
	token            int64
	g                *msGrant
	liveUntil        int64 // the lease's expires_at when the write was sent
	server           int
	out              crashOutcome
	body             string
	sent, recv       time.Time
}

// msSample is a lease seen live by a poller.
type msSample struct {
	lock, client, mode string
	token              int64
	src                string
	last               time.Time // when a poller last saw it
}

type msStats struct {
	requests, fiveXX               int
	answered, transport            [2]int
	acquires, granted, timedOut    int
	withdrawn, unacked, lapsedQ    int
	renewed, released, lapsed      int
	writesOK, writesStale, unknown int
}

func (s *msStats) add(o msStats) {
	s.requests += o.requests
	s.fiveXX += o.fiveXX
	for i := range s.answered {
		s.answered[i] += o.answered[i]
		s.transport[i] += o.transport[i]
	}
	s.acquires += o.acquires
	s.granted += o.granted
	s.timedOut += o.timedOut
	s.withdrawn += o.withdrawn
	s.unacked += o.unacked
	s.lapsedQ += o.lapsedQ
	s.renewed += o.renewed
	s.released += o.released
	s.lapsed += o.lapsed
	s.writesOK += o.writesOK
	s.writesStale += o.writesStale
	s.unknown += o.unknown
}

// msRun is everything the load recorded.
type msRun struct {
	t     *testing.T
	c     *msCluster
	cfg   msConfig
	seed  int64
	rng   *rand.Rand
	modes map[[2]string]string // (client, lock): the one mode the client asks for on the lock
	// The rest is written by the workers and pollers once they stop.
	mu        sync.Mutex
	grants    []*msGrant
	writes    []*msWrite
	errs      []string
	stats     msStats
	samples   map[[2]any]msSample // by (lock, token)
	pgPolls   int
	httpPolls int
	loadStart time.Time
	loadTime  time.Duration
}

func msLockName(i int) string   { return fmt.Sprintf("ms/lock-%d", i) }
func msClient(i int) string     { return fmt.Sprintf("c%02d", i) }
func msOrphan(i int) string     { return fmt.Sprintf("orphan-%d", i) }
func msWaiter(i int) string     { return fmt.Sprintf("waiter-%d", i) }
func msOrphanLock(i int) string { return fmt.Sprintf("ms/orphan-%d", i) }

func newMSRun(t *testing.T, c *msCluster, cfg msConfig) *msRun {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	run := &msRun{t: t, c: c, cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(uint64(seed), 0)),
		modes: map[[2]string]string{}, samples: map[[2]any]msSample{}}
	// Each client asks for one mode per lock, so that the audit log's grant
	// lines (which have no mode) tell the mode: about a third are readers.
	for i := range cfg.clients {
		for l := range msLocks {
			mode := "exclusive"
			if (i+l)%3 == 0 {
				mode = "shared"
			}
			run.modes[[2]string{msClient(i), msLockName(l)}] = mode
		}
	}
	return run
}

// startLoad starts the clients and the pollers; the function it returns stops
// them and waits until each client has finished what it was doing (it then
// holds nothing and waits for nothing).
func (run *msRun) startLoad() (stop func()) {
	conn, err := pgx.Connect(context.Background(), run.c.dsn)
	if err != nil {
		run.t.Fatalf("poller: connecting to the test schema: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg, pwg sync.WaitGroup
	run.loadStart = time.Now()
	for i := range run.cfg.clients {
		w := &msWorker{c: run.c, run: run, client: msClient(i), rng: rand.New(rand.NewPCG(uint64(run.seed), uint64(1+i)))}
		wg.Go(func() { w.loop(ctx) })
	}
	pwg.Go(func() { run.pgPoll(ctx, conn) })
	pwg.Go(func() { run.httpPoll(ctx) })
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				run.t.Fatal("the clients did not stop within 30 s of the end of the load")
			}
			run.loadTime = time.Since(run.loadStart)
			pwg.Wait()
			conn.Close(context.Background())
		})
	}
}

type msWorker struct {
	c      *msCluster
	run    *msRun
	client string
	rng    *rand.Rand
	down   [2]bool // servers this client saw fail; it uses the others
	seq    int
	grants []*msGrant
	writes []*msWrite
	errs   []string
	st     msStats
}

func (w *msWorker) errorf(format string, args ...any) {
	w.errs = append(w.errs, w.client+": "+fmt.Sprintf(format, args...))
}

func (w *msWorker) loop(ctx context.Context) {
	defer func() {
		w.run.mu.Lock()
		defer w.run.mu.Unlock()
		w.run.grants = append(w.run.grants, w.grants...)
		w.run.writes = append(w.run.writes, w.writes...)
		w.run.errs = append(w.run.errs, w.errs...)
		w.run.stats.add(w.st)
	}()
	for ctx.Err() == nil && w.once() {
	}
}

// send posts to a server picked at random among those this client has not
// seen fail. No context: once sent, a request is left to finish, because a
// request abandoned half-way may or may not have happened.
func (w *msWorker) send(path string, fields map[string]any) (crashAnswer, int) {
	var up []int
	for i, d := range w.down {
		if !d {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		return crashAnswer{err: errors.New("no server left")}, -1
	}
	s := up[w.rng.IntN(len(up))]
	r := w.c.api[s].post(context.Background(), path, fields)
	w.st.requests++
	switch {
	case r.err != nil && r.status == 0:
		w.down[s] = true
		w.st.transport[s]++
		if !w.c.killed[s].Load() {
			w.errorf("%s on server %c: no answer: %v", path, 'A'+s, r.err)
		}
	case r.err != nil:
		w.errorf("%s on server %c: %d %s: %v", path, 'A'+s, r.status, r.raw, r.err)
	case r.bad != nil:
		w.errorf("%s on server %c: %d %s: %v", path, 'A'+s, r.status, r.raw, r.bad)
	}
	if r.status != 0 {
		w.st.answered[s]++
	}
	if r.status >= 500 {
		w.st.fiveXX++
		w.errorf("%s %v on server %c: %d %s", path, fields, 'A'+s, r.status, r.raw)
	}
	return r, s
}

// ttl: leases left to lapse are short, so that their locks are not idle long.
func (w *msWorker) ttl(lapse bool) int64 {
	if lapse {
		return 1 + w.rng.Int64N(2)
	}
	return 3 + w.rng.Int64N(3)
}

// once takes a random lock, works under it, and releases it or lets it lapse;
// false stops the client after an answer it cannot go on from.
func (w *msWorker) once() bool {
	li := w.rng.IntN(msLocks)
	lock := msLockName(li)
	mode := w.run.modes[[2]string{w.client, lock}]
	lapse := w.rng.IntN(w.run.cfg.lapseOdds) == 0
	ttl := w.ttl(lapse)
	wait := 1 + w.rng.IntN(3)
	w.st.acquires++
	r, s := w.send("/v1/acquire", map[string]any{"client": w.client, "lock": lock, "ttl": ttl, "mode": mode, "wait": wait})
	res, granted := crashGrantedOf(r)
	_, queued := crashQueuedOf(r)
	switch {
	case r.err != nil:
		return w.reconcile(lock, nil)
	case granted:
		g := &msGrant{client: w.client, lock: lock, mode: mode, ttl: ttl, token: res.Token, grantedAt: res.GrantedAt,
			expires: res.ExpiresAt, lastExpires: res.ExpiresAt, server: s, wait: time.Duration(wait) * time.Second, sent: r.sent, recv: r.recv}
		w.grants = append(w.grants, g)
		w.st.granted++
		if res.GrantedAt != res.ExpiresAt-ttl {
			// A lease lasts its ttl from its start, on the spot or from the queue (L2, L3).
			w.errorf("acquire %s %s (ttl %d) on server %c: granted_at %d, not expires_at - ttl: %s",
				mode, lock, ttl, 'A'+s, res.GrantedAt, r.raw)
		}
		return w.hold(g, lapse)
	case queued:
		w.st.timedOut++
		return w.withdraw(lock)
	default:
		// Each client holds at most one lock and waits only while it holds
		// none: no deadlock, never busy, and nobody else withdraws it. After
		// a wrong answer the client may still be queued, or hold the lock:
		// settle that, so that the load and its other checks go on.
		w.errorf("acquire %s %s (ttl %d, wait %d) on server %c, sent %s, answered %s: %d %s",
			mode, lock, ttl, wait, 'A'+s, crashClock(r.sent), crashClock(r.recv), r.status, r.raw)
		return w.reconcile(lock, nil)
	}
}

func (w *msWorker) hold(g *msGrant, lapse bool) bool {
	for i := range 1 + w.rng.IntN(3) {
		key := w.client
		if w.rng.IntN(3) == 0 {
			key = msCommonKey
		}
		if !w.write(g, key) {
			return w.reconcile(g.lock, g)
		}
		if i == 0 && w.rng.IntN(4) == 0 && !w.renew(g, lapse) {
			return w.reconcile(g.lock, g)
		}
	}
	if lapse {
		return w.letLapse(g)
	}
	time.Sleep(time.Duration(w.rng.IntN(30)) * time.Millisecond)
	return w.release(g)
}

// write returns false when the write went unanswered.
func (w *msWorker) write(g *msGrant, key string) bool {
	wr := &msWrite{lock: g.lock, key: key, token: g.token, g: g, liveUntil: g.lastExpires,
		value: fmt.Sprintf("%s#%d#t%d", w.client, w.seq, g.token)}
	w.seq++
	w.writes = append(w.writes, wr)
	r, s := w.send("/v1/write", map[string]any{"lock": g.lock, "key": key, "value": wr.value, "token": g.token})
	wr.sent, wr.recv, wr.body, wr.server = r.sent, r.recv, r.raw, s
	switch {
	case r.err != nil:
		wr.out = crashUnknown
		w.st.unknown++
		return false
	case r.is(lk.OK):
		wr.out = crashAcked
		w.st.writesOK++
	case r.isErr(http.StatusConflict, lk.CodeStaleToken):
		wr.out = crashRefused
		w.st.writesStale++
	default:
		wr.out = crashUnknown
		w.errorf("write %s/%s token %d on server %c: %d %s", g.lock, key, g.token, 'A'+s, r.status, r.raw)
	}
	return true
}

// renew returns false when the renew went unanswered.
func (w *msWorker) renew(g *msGrant, lapse bool) bool {
	ttl := w.ttl(lapse)
	r, s := w.send("/v1/renew", map[string]any{"client": w.client, "lock": g.lock, "ttl": ttl})
	res, renewed := crashResult[lk.RenewResult](r)
	switch {
	case r.err != nil:
		g.renewUnknown = true
		return false
	case renewed && res.Outcome == lk.Renewed:
		if res.Token != g.token || res.GrantedAt != g.grantedAt {
			w.errorf("renew of %v on server %c answered %s: the token and the start (%d) must stay", g, 'A'+s, r.raw, g.grantedAt)
		}
		g.lastExpires = res.ExpiresAt
		w.st.renewed++
	case r.isErr(http.StatusConflict, lk.CodeNotHolder):
		if !g.renewUnknown && w.c.answeredBefore(r.recv, g.lastExpires) {
			w.errorf("renew of %v on server %c answered at %s, before the lease ended: not holder", g, 'A'+s, crashClock(r.recv))
		}
	default:
		w.errorf("renew of %v on server %c: %d %s", g, 'A'+s, r.status, r.raw)
	}
	return true
}

func (w *msWorker) release(g *msGrant) bool {
	r, s := w.send("/v1/release", map[string]any{"client": w.client, "lock": g.lock})
	g.relSent, g.relRecv, g.relBody = r.sent, r.recv, r.raw
	switch {
	case r.err != nil:
		g.rel = crashUnknown
		return w.reconcile(g.lock, g)
	case r.is(lk.Released):
		g.rel = crashAcked
		w.st.released++
	case r.isErr(http.StatusConflict, lk.CodeNotHolder):
		g.rel = crashRefused
		if !g.renewUnknown && w.c.answeredBefore(r.recv, g.lastExpires) {
			w.errorf("release of %v on server %c answered at %s, before the lease ended: not holder", g, 'A'+s, crashClock(r.recv))
		}
	default:
		w.errorf("release of %v on server %c: %d %s", g, 'A'+s, r.status, r.raw)
		return false
	}
	return true
}

// letLapse sleeps past the lease's end on the database's clock, writes on
// like a holder that stalled (sometimes), then finds the lease gone.
func (w *msWorker) letLapse(g *msGrant) bool {
	time.Sleep(w.c.untilDB(g.lastExpires) + w.c.slack)
	if w.rng.IntN(2) == 0 && !w.write(g, w.client) {
		return w.reconcile(g.lock, g)
	}
	r, s := w.send("/v1/release", map[string]any{"client": w.client, "lock": g.lock})
	switch {
	case r.err != nil:
		g.rel = crashUnknown
		return w.reconcile(g.lock, g)
	case r.isErr(http.StatusConflict, lk.CodeNotHolder):
		g.lapsed = !g.renewUnknown
		w.st.lapsed++
	case r.is(lk.Released):
		g.rel, g.relSent, g.relRecv, g.relBody = crashAcked, r.sent, r.recv, r.raw
		if !g.renewUnknown && w.c.sentAfter(r.sent, g.lastExpires) {
			w.errorf("release of %v on server %c, sent at %s after the lease ended, answered released (L2)",
				g, 'A'+s, crashClock(r.sent))
		}
	default:
		w.errorf("release after the lapse of %v on server %c: %d %s", g, 'A'+s, r.status, r.raw)
		return false
	}
	return true
}

// withdraw leaves the queue after a wait that ran out.
func (w *msWorker) withdraw(lock string) bool {
	r, s := w.send("/v1/release", map[string]any{"client": w.client, "lock": lock})
	switch {
	case r.err != nil:
		return w.reconcile(lock, nil)
	case r.is(lk.Withdrawn):
		w.st.withdrawn++
	case r.is(lk.Released):
		w.st.unacked++ // granted between the answer and the withdrawal
	case r.isErr(http.StatusConflict, lk.CodeNotHolder):
		w.st.lapsedQ++ // granted after the answer, and lapsed already
	default:
		w.errorf("withdrawing from %s on server %c: %d %s", lock, 'A'+s, r.status, r.raw)
		return false
	}
	return true
}

// reconcile settles what an unanswered request on lock may have left: a lease
// or a queue entry, either of which the client's next acquire would trip
// over. A release on a server still answering clears both.
func (w *msWorker) reconcile(lock string, g *msGrant) bool {
	for {
		r, s := w.send("/v1/release", map[string]any{"client": w.client, "lock": lock})
		switch {
		case r.err != nil && s >= 0 && r.status == 0:
			continue // that server is down now too: try another
		case r.err != nil:
			w.errorf("settling %s after an unanswered request: %v", lock, r.err)
			return false
		case r.is(lk.Released):
			if g != nil && g.rel != crashAcked {
				g.rel, g.relSent, g.relRecv, g.relBody = crashAcked, r.sent, r.recv, r.raw
			}
			if g == nil {
				w.st.unacked++
			}
		case r.is(lk.Withdrawn), r.isErr(http.StatusConflict, lk.CodeNotHolder):
		default:
			w.errorf("settling %s after an unanswered request, on server %c: %d %s", lock, 'A'+s, r.status, r.raw)
			return false
		}
		return true
	}
}

// --- the pollers ---

// msSnapshotSQL reads the leases, the queues and the clock in one statement,
// so from one snapshot: one committed state.
const msSnapshotSQL = `SELECT 'lease', lock, client, mode, token, expires_at, 0::bigint FROM leases
UNION ALL SELECT 'queue', lock, client, mode, 0, 0, position FROM queue_entries
UNION ALL SELECT 'clock', '', '', '', 0, coalesce(clock, 0), 0 FROM service`

type msRow struct {
	kind, lock, client, mode string
	token, expires, position int64
}

// pgPoll checks every committed state it sees: no exclusive lease beside
// another (S1), no lease still there at or after its expiry by the service's
// clock (every transaction retires those first: L1), no queue whose head could
// be granted beside the holders (S3), and modes as asked.
func (run *msRun) pgPoll(ctx context.Context, conn *pgx.Conn) {
	seen := map[[2]any]msSample{}
	var errs []string
	polls := 0
	defer func() {
		run.mu.Lock()
		defer run.mu.Unlock()
		run.pgPolls += polls
		run.errs = append(run.errs, errs...)
		run.noteSamples(seen, &run.errs)
	}()
	tick := time.NewTicker(msPollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// The snapshot is taken after the query is sent: whatever it shows
		// was live then.
		at := time.Now()
		rows, err := conn.Query(ctx, msSnapshotSQL)
		var snap []msRow
		if err == nil {
			for rows.Next() {
				var r msRow
				if err = rows.Scan(&r.kind, &r.lock, &r.client, &r.mode, &r.token, &r.expires, &r.position); err != nil {
					break
				}
				snap = append(snap, r)
			}
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				errs = append(errs, fmt.Sprintf("snapshot of the tables: %v", err))
			}
			return
		}
		polls++
		for _, why := range run.judgeSnapshot(snap) {
			errs = append(errs, fmt.Sprintf("snapshot %d of the tables: %s", polls, why))
		}
		for _, r := range snap {
			if r.kind == "lease" {
				msNote(seen, msSample{lock: r.lock, client: r.client, mode: r.mode, token: r.token, src: "the leases table", last: at}, &errs)
			}
		}
	}
}

func (run *msRun) judgeSnapshot(snap []msRow) []string {
	var why []string
	var clock int64
	holders := map[string][]crashHolder{}
	queues := map[string][]msRow{}
	for _, r := range snap {
		switch r.kind {
		case "clock":
			clock = r.expires
		case "lease":
			holders[r.lock] = append(holders[r.lock], crashHolder{lock: r.lock, client: r.client, mode: r.mode, token: r.token, expires: r.expires})
		case "queue":
			queues[r.lock] = append(queues[r.lock], r)
		}
	}
	for lock, hs := range holders {
		if w := crashExclusiveBeside(hs); w != "" {
			why = append(why, fmt.Sprintf("%s: %s: %s", lock, w, msHolders(hs)))
		}
		for _, h := range hs {
			if h.expires <= clock {
				why = append(why, fmt.Sprintf("%s: %s's lease (token %d) ends at %d, yet is still there at clock %d (L1)",
					lock, h.client, h.token, h.expires, clock))
			}
			if want := run.modes[[2]string{h.client, lock}]; h.mode != want {
				why = append(why, fmt.Sprintf("%s: %s holds token %d %s, but only ever asked for %q", lock, h.client, h.token, h.mode, want))
			}
		}
	}
	for lock, q := range queues {
		head := slices.MinFunc(q, func(a, b msRow) int { return cmp.Compare(a.position, b.position) })
		hs := holders[lock]
		compatible := len(hs) == 0 || head.mode == "shared" && crashExclusiveBeside(append(hs, crashHolder{mode: "shared"})) == ""
		if compatible {
			why = append(why, fmt.Sprintf("%s: %s waits at the head of the queue (%s) though it could hold the lock beside %s (S3)",
				lock, head.client, head.mode, msHolders(hs)))
		}
	}
	return why
}

func msHolders(hs []crashHolder) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = fmt.Sprintf("%s %s token %d until %d", h.client, h.mode, h.token, h.expires)
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// httpPoll reads /v1/locks from the two servers in turn.
func (run *msRun) httpPoll(ctx context.Context) {
	seen := map[[2]any]msSample{}
	var errs []string
	polls := 0
	defer func() {
		run.mu.Lock()
		defer run.mu.Unlock()
		run.httpPolls += polls
		run.errs = append(run.errs, errs...)
		run.noteSamples(seen, &run.errs)
	}()
	tick := time.NewTicker(msHTTPPoll)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s := i % 2
		if run.c.killed[s].Load() {
			continue
		}
		r, ok := run.c.api[s].crashLocks(ctx, func(r crashAnswer, list []lk.LockSummary) bool {
			for _, e := range list {
				lock, waiting := e.Lock, e.Waiting
				holders, err := crashParseHolders(e.Holders)
				if err != nil || lock == "" {
					errs = append(errs, fmt.Sprintf("locks on server %c: unexpected entry %+v: %v", 'A'+s, e, err))
					continue
				}
				if why := crashExclusiveBeside(holders); why != "" {
					errs = append(errs, fmt.Sprintf("locks on server %c, %s: %s: %s", 'A'+s, lock, why, r.raw))
				}
				if len(holders) == 0 && waiting > 0 {
					errs = append(errs, fmt.Sprintf("locks on server %c: %s has %d waiters and no holder (S3): %s", 'A'+s, lock, waiting, r.raw))
				}
				for _, h := range holders {
					msNote(seen, msSample{lock: lock, client: h.client, mode: h.mode, token: h.token,
						src: fmt.Sprintf("/v1/locks on server %c", 'A'+s), last: r.sent}, &errs)
				}
			}
			return true
		})
		if !ok {
			if ctx.Err() == nil && !run.c.killed[s].Load() {
				errs = append(errs, fmt.Sprintf("locks on server %c: %d %s %v %v", 'A'+s, r.status, r.raw, r.err, r.bad))
			}
			continue
		}
		polls++
	}
}

// msNote records a live lease, and complains if its (lock, token) was seen
// with another holder or mode.
func msNote(seen map[[2]any]msSample, s msSample, errs *[]string) {
	k := [2]any{s.lock, s.token}
	if prev, ok := seen[k]; ok {
		if prev.client != s.client || prev.mode != s.mode {
			*errs = append(*errs, fmt.Sprintf("%s: token %d held by %s %s (seen in %s) and by %s %s (seen in %s)",
				s.lock, s.token, prev.client, prev.mode, prev.src, s.client, s.mode, s.src))
		}
		if s.last.After(prev.last) {
			prev.last = s.last
			seen[k] = prev
		}
		return
	}
	seen[k] = s
}

// noteSamples merges a poller's samples into the run's; run.mu is held.
func (run *msRun) noteSamples(seen map[[2]any]msSample, errs *[]string) {
	for _, s := range seen {
		msNote(run.samples, s, errs)
	}
}

// --- after the load ---

// clearLocks releases every lease left (clients that stopped on an error,
// leases nobody was told about) so that every lease in the audit logs ends.
func (run *msRun) clearLocks(s int) {
	a := run.c.api[s]
	ctx := context.Background()
	for range 100 {
		seen, failed := 0, false
		r, ok := a.crashLocks(ctx, func(r crashAnswer, list []lk.LockSummary) bool {
			for _, e := range list {
				seen++
				lock := e.Lock
				holders, err := crashParseHolders(e.Holders)
				if err != nil || len(holders) == 0 {
					run.errs = append(run.errs, fmt.Sprintf("locks after the load: %s: %s", lock, r.raw))
					failed = true
					return false
				}
				for _, h := range holders {
					r := a.post(ctx, "/v1/release", map[string]any{"client": h.client, "lock": lock})
					if _, ok := crashResult[lk.ReleaseResult](r); !ok && !r.isErr(http.StatusConflict, lk.CodeNotHolder) {
						run.errs = append(run.errs, fmt.Sprintf("releasing %s's lease on %s after the load: %d %s %v %v", h.client, lock, r.status, r.raw, r.err, r.bad))
						failed = true
						return false
					}
				}
			}
			return true
		})
		if !ok {
			run.errs = append(run.errs, fmt.Sprintf("locks after the load: %d %s %v %v", r.status, r.raw, r.err, r.bad))
			return
		}
		if failed || seen == 0 {
			return
		}
	}
	run.errs = append(run.errs, "locks still held after 100 rounds of releases")
}

// msRead is a key's value as read through each server; nil: null, or not read.
type msRead struct {
	vals [2]*string
	read [2]bool
}

// readBack reads every key the clients may have written, through every
// server still running.
func (run *msRun) readBack() map[[2]string]*msRead {
	out := map[[2]string]*msRead{}
	ctx := context.Background()
	for l := range msLocks {
		lock := msLockName(l)
		keys := []string{msCommonKey}
		for i := range run.cfg.clients {
			keys = append(keys, msClient(i))
		}
		for _, key := range keys {
			rd := &msRead{}
			out[[2]string{lock, key}] = rd
			for s := range run.c.api {
				if run.c.killed[s].Load() {
					continue
				}
				r := run.c.api[s].get(ctx, "/v1/read", url.Values{"lock": {lock}, "key": {key}})
				v, err := crashValueOf(r)
				if err != nil {
					run.errs = append(run.errs, fmt.Sprintf("read %s/%s on server %c: %d %s %v", lock, key, 'A'+s, r.status, r.raw, err))
					continue
				}
				rd.vals[s] = v
				rd.read[s] = true
			}
		}
	}
	return out
}

// --- the audit logs ---

// msEvent is one audit line (docs/observability.md).
type msEvent struct {
	Msg       string `json:"msg"`
	Group     int64  `json:"group"`
	Mode      string `json:"mode"`
	Lock      string `json:"lock"`
	Client    string `json:"client"`
	Holder    string `json:"holder"`
	Token     int64  `json:"token"`
	At        int64  `json:"at"`
	ExpiresAt int64  `json:"expires_at"`
	Source    string `json:"source"`
	server    int
	line      int
}

func (e *msEvent) where() string {
	return fmt.Sprintf("server %c's audit line %d", 'A'+e.server, e.line)
}

// msLease is a lease as the merged audit logs tell it.
type msLease struct {
	lock, client, mode string
	token, at, expires int64
	source             string
	server             int // whose log has the grant
	ended              bool
	end                int64 // the instant it ended
	endHow             string
	endServer          int
}

func (l *msLease) String() string {
	end := "never ended"
	if l.ended {
		end = fmt.Sprintf("%s at %d by server %c", l.endHow, l.end, 'A'+l.endServer)
	}
	return fmt.Sprintf("%s %s token %d [%d, ...) granted (%s) by server %c, %s", l.client, l.mode, l.token, l.at, l.source, 'A'+l.server, end)
}

// msKill says which server the test killed, and when: its audit log may end
// with the lines of a transaction it was killed before committing.
type msKill struct {
	server int
	at     time.Time
}

type msCheck struct {
	capped
	run      *msRun
	kill     *msKill
	killSec  int64                         // the database second the kill happened in
	leases   map[string]map[int64]*msLease // by lock and token: every grant line
	endsAt   map[string]map[int64]bool     // instants something ended on a lock
	lost     map[string]map[int64]bool     // tokens granted in the killed server's lost last transaction
	events   []msEvent
	grantsBy [2]int
	lapses   [2]int
	stale    int
	// figures for the summary
	wakeups, crossWakeups, crossEarly int
}

func newMSCheck(t *testing.T, run *msRun, kill *msKill) *msCheck {
	ck := &msCheck{capped: capped{t: t}, run: run, kill: kill}
	if kill != nil {
		ck.killSec = kill.at.Add(run.c.offset).Unix()
	}
	return ck
}

// nearKill: an instant (database seconds) at which the killed server may have
// made changes whose audit lines it never wrote. None: it writes them
// before it commits.
func (ck *msCheck) nearKill(at int64) bool { return false }

func (ck *msCheck) all(reads map[[2]string]*msRead) {
	// Failures beyond crashMaxErrors are only counted: say which checks
	// failed, so that one flood does not hide the others.
	var tally []string
	phase := func(name string, fn func()) {
		n := ck.failures
		fn()
		if d := ck.failures - n; d > 0 {
			tally = append(tally, fmt.Sprintf("%s %d", name, d))
		}
	}
	phase("during the run", func() {
		for _, e := range ck.run.errs {
			ck.failf("during the run: %s", e)
		}
	})
	phase("audit logs", ck.readAudit)
	phase("leases from the audit logs", ck.checkLeases)
	phase("acknowledged grants", ck.checkGrants)
	phase("leases seen live", ck.checkSamples)
	phase("store", func() { ck.checkStore(reads) })
	ck.summary()
	if len(tally) > 0 {
		ck.t.Logf("failures by check: %s", strings.Join(tally, ", "))
	}
}

func (ck *msCheck) readAudit() {
	for s, path := range ck.run.c.audit {
		f, err := os.Open(path)
		if err != nil {
			ck.failf("audit log of server %c: %v", 'A'+s, err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			ck.failf("reading the audit log of server %c: %v", 'A'+s, err)
		}
		var mine []msEvent
		for i, line := range lines {
			e := msEvent{server: s, line: i + 1}
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				if ck.kill != nil && ck.kill.server == s && i == len(lines)-1 {
					ck.t.Logf("server %c's last audit line, torn by the kill: %q", 'A'+s, line)
					continue
				}
				ck.failf("server %c's audit line %d is not JSON: %q", 'A'+s, i+1, line)
				continue
			}
			switch e.Msg {
			case "start":
				continue
			case "commit_failed", "not_committed":
				// Cancels the latest group of that number before it.
				for j := len(mine) - 1; j >= 0 && mine[j].Group == e.Group; j-- {
					mine = mine[:j]
				}
				ck.t.Logf("%s: %s of group %d", e.where(), e.Msg, e.Group)
				continue
			}
			mine = append(mine, e)
		}
		if ck.kill != nil && ck.kill.server == s {
			mine = ck.dropUncommitted(mine)
		}
		ck.events = append(ck.events, mine...)
	}
}

// dropUncommitted drops the killed server's last group when it never
// committed: the kill came between writing its lines and committing it, and
// the survivor then granted one of its tokens again, or ended again a lease
// it ended.
func (ck *msCheck) dropUncommitted(mine []msEvent) []msEvent {
	if len(mine) == 0 {
		return mine
	}
	last := mine[len(mine)-1].Group
	from := len(mine)
	for from > 0 && mine[from-1].Group == last {
		from--
	}
	claims := map[string]bool{}
	for _, e := range mine[from:] {
		switch e.Msg {
		case "grant":
			claims[fmt.Sprintf("grant %s %d", e.Lock, e.Token)] = true
		case "lapse", "release", "revoke":
			claims[fmt.Sprintf("end %s %d", e.Lock, e.Token)] = true
		}
	}
	for _, path := range ck.run.c.audit {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			var e msEvent
			if json.Unmarshal([]byte(line), &e) != nil || path == ck.run.c.audit[ck.kill.server] {
				continue
			}
			kind := "grant"
			if e.Msg != "grant" {
				kind = "end"
			}
			if claims[fmt.Sprintf("%s %s %d", kind, e.Lock, e.Token)] {
				ck.t.Logf("server %c's last group %d never committed: the survivor did %s %s %d again",
					'A'+ck.kill.server, last, kind, e.Lock, e.Token)
				return mine[:from]
			}
		}
	}
	return mine
}

// checkLeases rebuilds every lease from the merged audit logs and checks
// tokens, lapses, hand-over instants and exclusion.
func (ck *msCheck) checkLeases() {
	run := ck.run
	ck.leases = map[string]map[int64]*msLease{}
	ck.endsAt = map[string]map[int64]bool{}
	ck.lost = map[string]map[int64]bool{}
	byHolder := map[[2]string][]*msLease{}
	endAt := func(lock string, at int64) {
		if ck.endsAt[lock] == nil {
			ck.endsAt[lock] = map[int64]bool{}
		}
		ck.endsAt[lock][at] = true
	}
	var releases []*msEvent
	for i := range ck.events {
		e := &ck.events[i]
		switch e.Msg {
		case "grant":
			ck.grantsBy[e.server]++
			mode, ok := run.modes[[2]string{e.Client, e.Lock}]
			if !ok {
				ck.failf("%s: grant of %s to %s, who never asked for it", e.where(), e.Lock, e.Client)
				continue
			}
			if e.Mode != mode {
				ck.failf("%s: grant of %s to %s says mode %q; %s only ever asks for it %s", e.where(), e.Lock, e.Client, e.Mode, e.Client, mode)
			}
			l := &msLease{lock: e.Lock, client: e.Client, mode: mode, token: e.Token, at: e.At, expires: e.ExpiresAt,
				source: e.Source, server: e.server}
			m := ck.leases[e.Lock]
			if m == nil {
				m = map[int64]*msLease{}
				ck.leases[e.Lock] = m
			}
			if prev := m[e.Token]; prev != nil {
				ck.failf("%s: token %d granted twice: %v, and %v (L5)", e.Lock, e.Token, prev, l)
				continue
			}
			if e.ExpiresAt <= e.At {
				ck.failf("%s: grant of token %d at %d until %d", e.where(), e.Token, e.At, e.ExpiresAt)
			}
			m[e.Token] = l
			k := [2]string{e.Lock, e.Client}
			byHolder[k] = append(byHolder[k], l)
		case "release", "revoke":
			releases = append(releases, e)
			endAt(e.Lock, e.At)
		case "withdraw":
			endAt(e.Lock, e.At)
		case "lapse", "stale_write":
		case "deadlock_abort":
			ck.failf("%s: a deadlock abort, though no client ever waits while it holds a lock: %+v", e.where(), *e)
		default:
			ck.failf("%s: unexpected %q", e.where(), e.Msg)
		}
	}

	// Tokens run 1, 2, 3, ... (L5), every grant logged: the killed server
	// wrote its transactions' lines before committing them.
	sorted := map[string][]int64{}
	for lock, m := range ck.leases {
		tokens := slices.Sorted(maps.Keys(m))
		sorted[lock] = tokens
		for i, tok := range tokens {
			want := int64(1)
			if i > 0 {
				want = tokens[i-1] + 1
			}
			if tok == want {
				continue
			}
			ck.failf("%s: tokens %d to %d were never granted, yet %v was (L5: every grant takes the next number)",
				lock, want, tok-1, m[tok])
		}
	}

	// Lapses name their token: match them first, so that a release in the
	// same second finds the lease it ended still open.
	for i := range ck.events {
		e := &ck.events[i]
		switch e.Msg {
		case "lapse":
			ck.lapses[e.server]++
			endAt(e.Lock, e.At)
			l := ck.leases[e.Lock][e.Token]
			switch {
			case l == nil:
				if !ck.lost[e.Lock][e.Token] {
					ck.failf("%s: lapse of %s token %d, never granted", e.where(), e.Lock, e.Token)
				}
			case l.client != e.Holder:
				ck.failf("%s: lapse of %s token %d held by %s, but %v", e.where(), e.Lock, e.Token, e.Holder, l)
			case l.ended:
				ck.failf("%s: %s: lease retired twice: %v, and lapsed at %d", e.where(), e.Lock, l, e.At)
			case e.At <= l.at:
				ck.failf("%s: %s: lapse at %d, not after the lease began: %v", e.where(), e.Lock, e.At, l)
			default:
				l.ended, l.end, l.endHow, l.endServer = true, e.At, "lapse", e.server
			}
		case "stale_write":
			ck.stale++
		}
	}
	// A client holds at most one lease on a lock at a time, so a release
	// ends the one granted last before it. Within one second that may be a
	// lease granted at the release's instant or one granted earlier; with
	// the releases taken in time order, the earlier one is still open only
	// if this release is what ended it.
	slices.SortStableFunc(releases, func(a, b *msEvent) int { return cmp.Compare(a.At, b.At) })
	for _, ls := range byHolder {
		slices.SortFunc(ls, func(a, b *msLease) int { return cmp.Compare(a.token, b.token) })
	}
	for _, e := range releases {
		var found *msLease
		for _, l := range byHolder[[2]string{e.Lock, e.Client}] {
			if !l.ended && l.at < e.At {
				found = l // the last one
			}
		}
		if found == nil {
			for _, l := range byHolder[[2]string{e.Lock, e.Client}] {
				if !l.ended && l.at == e.At {
					found = l
					break
				}
			}
		}
		if found == nil {
			if len(ck.lost[e.Lock]) == 0 {
				ck.failf("%s: %s of %s by %s at %d, who held no lease then", e.where(), e.Msg, e.Lock, e.Client, e.At)
			}
			continue
		}
		found.ended, found.end, found.endHow, found.endServer = true, e.At, e.Msg, e.server
	}

	for lock, tokens := range sorted {
		m := ck.leases[lock]
		var prev *msLease
		// Exclusion: with leases in grant (token) order, each must start no
		// earlier than every earlier lease it cannot share the lock with
		// ended. Whole seconds: a finer overlap shows in the checks on
		// samples and on acknowledged releases.
		var lastAll, lastExcl *msLease
		for _, tok := range tokens {
			l := m[tok]
			if prev != nil && l.at < prev.at {
				ck.failf("%s: %v starts before %v, which has the lower token (S4)", lock, l, prev)
			}
			if l.source == "queue" && !ck.endsAt[lock][l.at] && !ck.nearKill(l.at) {
				ck.failf("%s: %v was granted from the queue at %d, but nothing on the lock ended then (L3)", lock, l, l.at)
			}
			if !l.ended && !ck.mayHaveEndedUnlogged(l) {
				ck.failf("%s: %v: no release, lapse or revoke line ends it, though every lease was ended before the servers stopped", lock, l)
			}
			other := lastExcl
			if l.mode == "exclusive" {
				other = lastAll
			}
			if other != nil && other.end > l.at {
				ck.failf("%s: %v began while %v still held the lock (S1)", lock, l, other)
			}
			if l.ended {
				if lastAll == nil || l.end > lastAll.end {
					lastAll = l
				}
				if l.mode == "exclusive" && (lastExcl == nil || l.end > lastExcl.end) {
					lastExcl = l
				}
			}
			prev = l
		}
	}
}

// mayHaveEndedUnlogged: the lease may have ended in a transaction whose
// audit lines were lost. None is: lines are written before the commit.
func (ck *msCheck) mayHaveEndedUnlogged(l *msLease) bool { return false }

// checkGrants compares what the clients were told with the audit logs, and
// with each other.
func (ck *msCheck) checkGrants() {
	run := ck.run
	byLock := map[string][]*msGrant{}
	acked := map[[2]any]*msGrant{}
	for _, g := range run.grants {
		k := [2]any{g.lock, g.token}
		if prev := acked[k]; prev != nil {
			ck.failf("%s: token %d acknowledged twice: to %v and to %v", g.lock, g.token, prev, g)
			continue
		}
		acked[k] = g
		byLock[g.lock] = append(byLock[g.lock], g)

		l := ck.leases[g.lock][g.token]
		if l == nil {
			if !ck.lost[g.lock][g.token] {
				ck.failf("%s: acknowledged grant %v is in neither audit log", g.lock, g)
			}
			continue
		}
		if l.client != g.client || l.expires != g.expires || l.at != g.grantedAt {
			ck.failf("%s: acknowledged grant %v from %d, but the audit logs say %v until %d", g.lock, g, g.grantedAt, l, l.expires)
		}
		// A grant on the spot is made by the acquire's own transaction, on
		// the server that answers it.
		if l.source == "immediate" && l.server != g.server {
			ck.failf("%s: %v answered by server %c, but granted on the spot by server %c", g.lock, g, 'A'+g.server, 'A'+l.server)
		}
		if l.source == "queue" {
			ck.wakeups++
			if l.server != g.server {
				ck.crossWakeups++
				// Answered well before its wait ran out: woken by the other
				// server's notification, not by reading the state at the end.
				if g.recv.Sub(g.sent) < g.wait-300*time.Millisecond {
					ck.crossEarly++
				}
			}
		}
		switch {
		case g.rel == crashAcked && l.ended && l.endHow != "release":
			ck.failf("%s: %v was released (acknowledged at %s), but the audit logs say %v", g.lock, g, crashClock(g.relRecv), l)
		case g.lapsed && !l.ended && ck.mayHaveEndedUnlogged(l):
		case g.lapsed && !(l.ended && l.endHow == "lapse" && l.end == g.lastExpires):
			ck.failf("%s: %v was left to lapse at %d and found gone, but the audit logs say %v (L3: it ends at its expires_at)",
				g.lock, g, g.lastExpires, l)
		case l.ended && l.endHow == "lapse" && !g.renewUnknown && l.end != g.lastExpires:
			ck.failf("%s: %v lapsed at %d, not at its expires_at %d (L3)", g.lock, g, l.end, g.lastExpires)
		}
	}

	for lock, gs := range byLock {
		slices.SortFunc(gs, func(a, b *msGrant) int { return cmp.Compare(a.token, b.token) })
		// Tokens follow grant order: no grant with a higher token was
		// answered before a lower one was asked for. Walking down the
		// tokens, keep the earliest answer among the higher ones.
		var first *msGrant
		for i := len(gs) - 1; i >= 0; i-- {
			g := gs[i]
			if first != nil && first.recv.Before(g.sent) {
				ck.failf("%s: %v was answered before %v was asked for, yet has the higher token (L5)", lock, first, g)
			}
			if first == nil || g.recv.Before(first.recv) {
				first = g
			}
		}
		// A lease released with an acknowledgement was held until its
		// release ran, so a lease that cannot share the lock with it was
		// granted after, and answered after the release was sent.
		var lastAll, lastExcl *msGrant
		for _, g := range gs {
			other := lastExcl
			if g.mode == "exclusive" {
				other = lastAll
			}
			if other != nil && !other.relSent.Before(g.recv) {
				ck.failf("%s: %v was answered at %s, before the release of %v was sent at %s (S1)",
					lock, g, crashClock(g.recv), other, crashClock(other.relSent))
			}
			if g.rel == crashAcked {
				if lastAll == nil || g.relSent.After(lastAll.relSent) {
					lastAll = g
				}
				if g.mode == "exclusive" && (lastExcl == nil || g.relSent.After(lastExcl.relSent)) {
					lastExcl = g
				}
			}
		}
	}
}

// checkSamples: every lease a poller saw live was granted, to that client.
func (ck *msCheck) checkSamples() {
	for _, s := range ck.run.samples {
		l := ck.leases[s.lock][s.token]
		switch {
		case l == nil:
			if !ck.lost[s.lock][s.token] {
				ck.failf("%s: %s held token %d (seen in %s), which neither audit log grants", s.lock, s.client, s.token, s.src)
			}
		case l.client != s.client || l.mode != s.mode:
			ck.failf("%s: %s held token %d %s (seen in %s), but the audit logs say %v", s.lock, s.client, s.token, s.mode, s.src, l)
		}
	}
}

// checkStore judges the writes and the values read back.
func (ck *msCheck) checkStore(reads map[[2]string]*msRead) {
	run, c := ck.run, ck.run.c
	byLock := map[string][]*msWrite{}
	byKey := map[[2]string][]*msWrite{}
	refused, refusedOrUnknown := 0, 0
	for _, w := range run.writes {
		byLock[w.lock] = append(byLock[w.lock], w)
		k := [2]string{w.lock, w.key}
		byKey[k] = append(byKey[k], w)
		if w.out == crashRefused {
			refused++
		}
		if w.out == crashRefused || w.out == crashUnknown {
			refusedOrUnknown++
		}
		// While an exclusive lease is live nobody else holds a token as high
		// as its own (L5), so its writes are never stale (L6).
		if w.out == crashRefused && w.g.mode == "exclusive" && !w.g.renewUnknown && c.answeredBefore(w.recv, w.liveUntil) {
			ck.failf("%s: write of %s with token %d by the exclusive holder %v, answered at %s while the lease was live: %s",
				w.lock, w.key, w.token, w.g, crashClock(w.recv), w.body)
		}
	}
	// Every refusal answered had its audit line written first; an
	// unanswered write may have been refused too.
	if ck.stale < refused || ck.stale > refusedOrUnknown {
		ck.failf("the audit logs have %d stale_write lines for %d writes refused as stale (and %d unanswered)",
			ck.stale, refused, refusedOrUnknown-refused)
	}

	for lock, ws := range byLock {
		// L6 across servers: a write accepted after another was acknowledged
		// carries a token at least as high.
		ack := slices.DeleteFunc(slices.Clone(ws), func(w *msWrite) bool { return w.out != crashAcked })
		slices.SortFunc(ack, func(a, b *msWrite) int { return a.recv.Compare(b.recv) })
		best := make([]*msWrite, len(ack)) // best[i]: highest token among ack[:i+1]
		for i, w := range ack {
			best[i] = w
			if i > 0 && best[i-1].token > w.token {
				best[i] = best[i-1]
			}
		}
		for _, w := range ack {
			i := sort.Search(len(ack), func(i int) bool { return !ack[i].recv.Before(w.sent) }) - 1
			if i >= 0 && best[i].token > w.token {
				ck.failf("%s: write of %s with token %d accepted (sent %s), after a write with token %d was acknowledged at %s (L6)",
					lock, w.key, w.token, crashClock(w.sent), best[i].token, crashClock(best[i].recv))
			}
		}
		// A refusal needs a higher token accepted before it: a write that
		// was acknowledged, or went unanswered, and was sent before the
		// refusal came back.
		cand := slices.DeleteFunc(slices.Clone(ws), func(w *msWrite) bool { return w.out != crashAcked && w.out != crashUnknown })
		slices.SortFunc(cand, func(a, b *msWrite) int { return a.sent.Compare(b.sent) })
		high := make([]int64, len(cand))
		for i, w := range cand {
			high[i] = w.token
			if i > 0 {
				high[i] = max(high[i], high[i-1])
			}
		}
		for _, w := range ws {
			if w.out != crashRefused {
				continue
			}
			i := sort.Search(len(cand), func(i int) bool { return !cand[i].sent.Before(w.recv) }) - 1
			if i < 0 || high[i] <= w.token {
				ck.failf("%s: write of %s with token %d refused as stale (answered %s), but no higher token was written before (L6)",
					lock, w.key, w.token, crashClock(w.recv))
			}
		}
	}

	checked := 0
	for k, rd := range reads {
		lock, key := k[0], k[1]
		ws := byKey[k]
		slices.SortFunc(ws, func(a, b *msWrite) int { return a.sent.Compare(b.sent) })
		for s := range rd.vals {
			if !rd.read[s] {
				continue
			}
			checked++
			var why string
			if key == msCommonKey {
				why = crashJudgeValue(msAsCrashWrites(ws), rd.vals[s])
			} else {
				why = msJudgeOwn(ws, rd.vals[s])
			}
			if why != "" {
				ck.failf("%s/%s read through server %c: %s", lock, key, 'A'+s, why)
			}
		}
		if rd.read[0] && rd.read[1] && msShow(rd.vals[0]) != msShow(rd.vals[1]) {
			ck.failf("%s/%s reads %s through server A and %s through server B", lock, key, msShow(rd.vals[0]), msShow(rd.vals[1]))
		}
	}
	ck.t.Logf("%d (lock, key) reads judged", checked)
}

// msAsCrashWrites lets the crash test's judge, which allows for unanswered
// writes, judge a key many clients write.
func msAsCrashWrites(ws []*msWrite) []*crashWrite {
	out := make([]*crashWrite, len(ws))
	for i, w := range ws {
		out[i] = &crashWrite{lock: w.lock, key: w.key, value: w.value, token: w.token, out: w.out, body: w.body, sent: w.sent, recv: w.recv}
	}
	return out
}

func msShow(v *string) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *v)
}

// msJudgeOwn judges a key only its client writes, one write at a time: it
// holds the client's last acknowledged write, or a later one that went
// unanswered; null only if none was acknowledged. ws are in the order sent.
func msJudgeOwn(ws []*msWrite, got *string) string {
	var last *msWrite
	for _, w := range ws {
		if w.out == crashAcked {
			last = w
		}
	}
	allowed := map[string]bool{}
	if last != nil {
		allowed[msShow(&last.value)] = true
	} else {
		allowed["null"] = true
	}
	for _, w := range ws {
		if w.out == crashUnknown && (last == nil || w.sent.After(last.recv)) {
			allowed[msShow(&w.value)] = true
		}
	}
	if allowed[msShow(got)] {
		return ""
	}
	want := slices.Sorted(maps.Keys(allowed))
	if got == nil {
		return fmt.Sprintf("null, but the client's last acknowledged write was %v", want)
	}
	for _, w := range ws {
		if w.value == *got {
			switch w.out {
			case crashRefused:
				return fmt.Sprintf("%q, a write refused as stale (want %v)", *got, want)
			case crashAcked:
				return fmt.Sprintf("%q, an earlier acknowledged write: the last one, %v, was lost", *got, want)
			}
		}
	}
	return fmt.Sprintf("%q, which the client never wrote (want %v)", *got, want)
}

// sanity: the run exercised what it is meant to.
func (ck *msCheck) sanity() {
	run := ck.run
	st := run.stats
	if st.fiveXX > 0 {
		ck.failf("%d answers were 5xx", st.fiveXX)
	}
	for s := range ck.grantsBy {
		if ck.grantsBy[s] == 0 {
			ck.failf("server %c's audit log has no grant: it did no work", 'A'+s)
		}
	}
	if ck.lapses[0]+ck.lapses[1] == 0 || st.lapsed == 0 {
		ck.failf("no lease lapsed (%d lapse lines, %d leases left to lapse)", ck.lapses[0]+ck.lapses[1], st.lapsed)
	}
	if ck.crossEarly == 0 {
		ck.failf("no blocked acquire was woken by a grant the other server made (%d cross-server hand-overs in all)", ck.crossWakeups)
	}
	if len(run.samples) == 0 || run.pgPolls < 10 {
		ck.failf("the pollers saw too little: %d snapshots, %d leases", run.pgPolls, len(run.samples))
	}
}

func (ck *msCheck) summary() {
	run := ck.run
	st := run.stats
	maxTok := map[string]int64{}
	for lock, m := range ck.leases {
		for tok := range m {
			maxTok[lock] = max(maxTok[lock], tok)
		}
	}
	ck.t.Logf("load %v: %d clients, %d requests (%d answered by A, %d by B; %d unanswered: %d to A, %d to B; %d 5xx)",
		run.loadTime.Round(time.Millisecond), run.cfg.clients, st.requests, st.answered[0], st.answered[1],
		st.transport[0]+st.transport[1], st.transport[0], st.transport[1], st.fiveXX)
	ck.t.Logf("acquires %d: %d granted (acknowledged), %d waits ran out (%d withdrawn, %d granted meanwhile and released, %d granted and lapsed meanwhile)",
		st.acquires, st.granted, st.timedOut, st.withdrawn, st.unacked, st.lapsedQ)
	ck.t.Logf("audit logs: grants A %d / B %d, lapses A %d / B %d, %d stale writes; %d renewals, %d releases, %d leases left to lapse",
		ck.grantsBy[0], ck.grantsBy[1], ck.lapses[0], ck.lapses[1], ck.stale, st.renewed, st.released, st.lapsed)
	ck.t.Logf("hand-overs to blocked acquires: %d, of which %d granted by the other server (%d answered before their wait ran out)",
		ck.wakeups, ck.crossWakeups, ck.crossEarly)
	ck.t.Logf("writes: %d acknowledged, %d refused as stale, %d unanswered; %d snapshots of the tables, %d /v1/locks polls, %d distinct leases seen live; highest tokens %v",
		st.writesOK, st.writesStale, st.unknown, run.pgPolls, run.httpPolls, len(run.samples), maxTok)
}
