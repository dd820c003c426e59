package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestFailoverToStandby fails the database over for real, under load, and
// checks what docs/deployment.md ("When the database fails over") promises.
// .ci/postgres starts a primary of this test's own, with PostgreSQL's
// durable defaults, and a synchronous standby of it; two `leasekeeper serve`
// are given both hosts with target_session_attrs=read-write. Clients acquire,
// write under their token, renew and release through either server; in the
// middle the primary is stopped as a power cut would stop it (immediate
// shutdown), and after a pause, as an operator or a failover manager would
// take, the standby is promoted. The clients go on. What must hold:
//
//   - every answer is a correct result or 503 {"error": "unavailable"} with
//     Retry-After: 1: no 500, no hang, no answer the state does not allow;
//   - both servers answer normally again within foRecoverBy of the
//     promotion, on their own (nobody restarts them);
//   - no token of an acknowledged grant is handed out again: on each lock,
//     tokens rise in the order the grants were made, across the failover,
//     and a grant after it gets a token above every one acknowledged before;
//   - every acknowledged store write survives (its key reads back the
//     client's last acknowledged value, or a later one whose answer was a
//     503: a request whose commit was cut off may have happened), and the
//     fence still refuses a token below the highest acknowledged write;
//   - service time never runs backwards: an operation asked for after
//     another was answered runs at a ts no lower, and each server's
//     /v1/health clock never decreases;
//   - blocked acquires waiting across the failover are answered: granted
//     when their lock is released after it, whether the release's
//     notification reaches them or only the recheck after their server's
//     listener reconnects, and queued when their wait runs out.
//
// The primary and the standby run on this machine, so they share a clock: a
// new primary whose clock is behind (time stands still) is not tried here.
const (
	foClients   = 8
	foLocks     = 3
	foTTL       = 15                      // seconds: no worker's lease lapses during the test
	foBefore    = 4 * time.Second         // load before the primary dies
	foGap       = 1 * time.Second         // primary dead, standby not yet promoted
	foAfter     = 6 * time.Second         // load after the primary dies
	foRecoverBy = 5 * time.Second         // after the promotion, no more 503
	foRetry     = 50 * time.Millisecond   // a client's pause after a 503 (finer than Retry-After, to time the recovery)
	foSlowest   = 12 * time.Second        // above the servers' 10 s lock_timeout: longer is a hang
	foHealth    = 50 * time.Millisecond   // health polling
	foLiveSlack = 1500 * time.Millisecond // a lease is surely live until expires_at minus this
)

// The blocked acquires: each waits on a lock that a holder took before the load.
const (
	foLockWoken   = "fo/blocked-woken"   // released 2 s after the promotion: the waiter hears of it
	foLockRecheck = "fo/blocked-recheck" // released at once after the promotion, maybe before the waiter's server listens again
	foLockTimeout = "fo/blocked-timeout" // never released during the wait: it runs out after the failover
	foWaitLong    = 20                   // seconds: well past when the releases come
	foWaitTimeout = 9                    // seconds: ends after the promotion, before the load stops
)

func foLockName(i int) string { return fmt.Sprintf("fo/lock-%d", i) }

// foScript is .ci/postgres, once the machine is known to have what it needs.
func foScript(t *testing.T) string {
	t.Helper()
	howTo := "Run `bash .ci/run`, which installs PostgreSQL; " + pgtest.EnvVar + "=skip skips the PostgreSQL tests outside CI."
	switch {
	case os.Getenv(pgtest.EnvVar) == "skip" && os.Getenv("CI") != "":
		t.Fatalf("%s=skip, but CI never skips the PostgreSQL tests. %s", pgtest.EnvVar, howTo)
	case os.Getenv(pgtest.EnvVar) == "skip":
		t.Skipf("skipped, since %s=skip. %s", pgtest.EnvVar, howTo)
	}
	// Where .ci/postgres looks: PATH, then Debian's place for the server.
	// It would install PostgreSQL itself, but a test has no business
	// installing packages.
	for _, name := range []string{"pg_ctl", "pg_basebackup"} {
		if _, err := exec.LookPath(name); err == nil {
			continue
		}
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name); len(m) == 0 {
			t.Fatalf("this test starts a PostgreSQL primary and standby of its own, and found no %s. %s", name, howTo)
		}
	}
	return filepath.Join(testutil.RepoRoot(t), ".ci", "postgres")
}

// foPG is the test's primary and standby.
type foPG struct {
	t                *testing.T
	script           string
	primary, standby string // their directories
	urls             [2]string
}

func (p *foPG) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{p.script}, args...)...)
	// The PostgreSQL defaults: synchronous_commit on, so that a commit is
	// acknowledged only once the standby has it.
	cmd.Env = append(os.Environ(), "LEASEKEEPER_PG_DURABLE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf(".ci/postgres %s: %v\n%s", args[0], err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (p *foPG) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

func startFOPG(t *testing.T, script string) *foPG {
	p := &foPG{t: t, script: script}
	base := t.TempDir()
	if os.Geteuid() == 0 {
		// .ci/postgres runs the servers as the postgres user, which must
		// reach their directories: t.TempDir and the test's directory
		// above it are 0700. Entering them is enough.
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.primary, p.standby = filepath.Join(base, "primary"), filepath.Join(base, "standby")
	// Stopped in reverse order: the standby first, then the primary. Each
	// cleanup is registered before its start, since a start that fails
	// half-way leaves the directory to its caller.
	for _, d := range []string{p.primary, p.standby} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := p.run("stop", d); err != nil {
				t.Errorf("stopping the cluster in %s: %v", d, err)
			}
		})
	}
	p.urls[0] = p.must("start", p.primary)
	p.urls[1] = p.must("standby", p.primary, p.standby)
	return p
}

// dsn lists both hosts, the way docs/deployment.md says to.
func (p *foPG) dsn() string {
	var hosts []string
	for _, u := range p.urls {
		pu, err := url.Parse(u)
		if err != nil {
			p.t.Fatalf(".ci/postgres printed %q: %v", u, err)
		}
		hosts = append(hosts, pu.Host)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// --- the servers and the requests ---

type foCluster struct {
	t   *testing.T
	pg  *foPG
	srv [2]*crashServer
	hc  *http.Client

	// down is set just before the primary is stopped: writes sent after it
	// go to keys of their own, so that the keys written only before it
	// show whether what the old primary acknowledged survived.
	down atomic.Bool

	mu   sync.Mutex
	reqs []*foAnswer // every request of the test, in the order answered
}

// foAnswer is one request and its answer. err is set when no answer came.
type foAnswer struct {
	crashAnswer
	server     int
	path, what string
	retryAfter string
}

func (a *foAnswer) String() string {
	if a.err != nil && a.status == 0 {
		return fmt.Sprintf("%s on server %c, sent %s: no answer after %v: %v", a.what, 'A'+a.server, crashClock(a.sent),
			a.recv.Sub(a.sent).Round(time.Millisecond), a.err)
	}
	s := fmt.Sprintf("%s on server %c, sent %s, answered %s: %d %s", a.what, 'A'+a.server, crashClock(a.sent), crashClock(a.recv), a.status, a.raw)
	if a.bad != nil {
		s += fmt.Sprintf(" (%v)", a.bad)
	}
	if a.err != nil {
		s += fmt.Sprintf(" (%v)", a.err)
	}
	return s
}

// unavailable: the answer docs/deployment.md promises while the database is away.
func (a *foAnswer) unavailable() bool {
	return a.isErr(http.StatusServiceUnavailable, lk.CodeUnavailable) && a.retryAfter == "1"
}

func (c *foCluster) post(s int, path string, fields map[string]any) *foAnswer {
	b, _ := json.Marshal(fields)
	req, err := http.NewRequest(http.MethodPost, c.srv[s].base+path, bytes.NewReader(b))
	return c.do(s, req, err, fmt.Sprintf("%s %s", path, b))
}

func (c *foCluster) get(s int, path string, q url.Values) *foAnswer {
	u := c.srv[s].base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	return c.do(s, req, err, path+"?"+q.Encode())
}

// do sends without a context of the test's: a request abandoned half-way
// may or may not have happened, so each runs to its answer (or to the
// client's timeout, which is a hang). A request that could not be made
// comes back as one without an answer: the workers, in goroutines of their
// own, may not call t.Fatal.
func (c *foCluster) do(s int, req *http.Request, err error, what string) *foAnswer {
	a := &foAnswer{server: s, what: what}
	if err != nil {
		a.sent = time.Now()
		a.err, a.recv = err, time.Now()
		c.record(a)
		return a
	}
	a.path = req.URL.Path
	a.crashAnswer = crashDo(c.hc, req)
	a.retryAfter = a.header.Get("Retry-After")
	c.record(a)
	return a
}

func (c *foCluster) record(a *foAnswer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, a)
}

// settle sends release until it gets a definite answer: after a 503 the
// client may hold the lock, wait for it, or neither.
func (c *foCluster) settle(s int, client, lock string, limit time.Duration) (*foAnswer, error) {
	deadline := time.Now().Add(limit)
	for {
		r := c.post(s, "/v1/release", map[string]any{"client": client, "lock": lock})
		if !r.unavailable() {
			return r, nil
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("release of %s by %s still unavailable after %v: %v", lock, client, limit, r)
		}
		time.Sleep(foRetry)
	}
}

// --- the load ---

type foGrant struct {
	client, lock   string
	token, expires int64 // expires after the last acknowledged renew
	grantedAt      int64 // the lease's start, which a renew keeps
	server         int
	sent, recv     time.Time
}

func (g *foGrant) String() string {
	return fmt.Sprintf("%s token %d until %d (acquire on server %c answered %s)", g.client, g.token, g.expires, 'A'+g.server, crashClock(g.recv))
}

// foTS is an acknowledged operation whose answer tells the ts it ran at.
type foTS struct {
	ts         int64
	sent, recv time.Time
	what       string
}

// foSurelyLive: the lease (ending at expires, in the database's clock, which
// is this machine's) was live when an answer came at recv.
func foSurelyLive(recv time.Time, expires int64) bool {
	return recv.Add(foLiveSlack).Before(time.Unix(expires, 0))
}

type foWorker struct {
	c      *foCluster
	client string
	rng    *rand.Rand
	seq    int
	grants []*foGrant
	writes []*msWrite
	ops    []foTS
	errs   []string
}

func (w *foWorker) wrong(r *foAnswer, why string) {
	w.errs = append(w.errs, fmt.Sprintf("%s: %s: %v", w.client, why, r))
}

// send picks a server per request, as a load balancer would: a lease taken
// through one is written under, renewed and released through either.
func (w *foWorker) send(path string, fields map[string]any) *foAnswer {
	return w.c.post(w.rng.IntN(2), path, fields)
}

func (w *foWorker) loop(ctx context.Context) {
	for ctx.Err() == nil && w.once() {
	}
}

// once: acquire a lock without waiting; when granted, write and maybe renew
// under it, then release. False stops the worker.
func (w *foWorker) once() bool {
	lock := foLockName(w.rng.IntN(foLocks))
	r := w.send("/v1/acquire", map[string]any{"client": w.client, "lock": lock, "ttl": foTTL})
	if res, ok := crashGrantedOf(r.crashAnswer); ok {
		g := &foGrant{client: w.client, lock: lock, token: res.Token, grantedAt: res.GrantedAt, expires: res.ExpiresAt,
			server: r.server, sent: r.sent, recv: r.recv}
		w.grants = append(w.grants, g)
		if res.GrantedAt != res.ExpiresAt-foTTL {
			w.wrong(r, "acquire: granted_at is not expires_at - ttl (L2)")
		}
		// wait 0: a grant on the spot, which starts at the operation's ts.
		w.ops = append(w.ops, foTS{ts: res.ExpiresAt - foTTL, sent: r.sent, recv: r.recv, what: r.what})
		return w.hold(g)
	}
	_, queued := crashQueuedOf(r.crashAnswer)
	switch {
	case r.unavailable():
		time.Sleep(foRetry)
		return w.settle(lock, nil, false)
	case queued:
		if !w.settle(lock, nil, true) {
			return false
		}
		time.Sleep(time.Duration(w.rng.IntN(10)) * time.Millisecond)
		return true
	default:
		// The client holds nothing and waits for nothing: busy or a
		// deadlock would be as wrong as a 500.
		w.wrong(r, "acquire")
		return w.settle(lock, nil, false)
	}
}

func (w *foWorker) hold(g *foGrant) bool {
	for i := range 1 + w.rng.IntN(3) {
		if !w.write(g) {
			return w.settle(g.lock, g, false)
		}
		if i == 0 && w.rng.IntN(3) == 0 && !w.renew(g) {
			return w.settle(g.lock, g, false)
		}
	}
	time.Sleep(time.Duration(w.rng.IntN(20)) * time.Millisecond)
	r := w.send("/v1/release", map[string]any{"client": w.client, "lock": g.lock})
	switch {
	case r.is(lk.Released):
		return true
	case r.unavailable():
		time.Sleep(foRetry)
	case r.isErr(http.StatusConflict, lk.CodeNotHolder) && !foSurelyLive(r.recv, g.expires):
	default:
		w.wrong(r, fmt.Sprintf("release of %v", g))
	}
	return w.settle(g.lock, g, false)
}

// write: false when the write's fate is unknown.
func (w *foWorker) write(g *foGrant) bool {
	key := w.client + "/before"
	if w.c.down.Load() {
		key = w.client + "/after"
	}
	wr := &msWrite{lock: g.lock, key: key, token: g.token, liveUntil: g.expires,
		value: fmt.Sprintf("%s#%d#t%d", w.client, w.seq, g.token)}
	w.seq++
	w.writes = append(w.writes, wr)
	r := w.send("/v1/write", map[string]any{"lock": g.lock, "key": wr.key, "value": wr.value, "token": g.token})
	wr.sent, wr.recv, wr.body, wr.server = r.sent, r.recv, r.raw, r.server
	switch {
	case r.is(lk.OK):
		wr.out = crashAcked
		return true
	case r.isErr(http.StatusConflict, lk.CodeStaleToken):
		wr.out = crashRefused
		// Nobody holds a higher token while an exclusive lease is live.
		if foSurelyLive(r.recv, g.expires) {
			w.wrong(r, fmt.Sprintf("write under the live lease %v refused", g))
		}
		return true
	case r.unavailable():
		wr.out = crashUnknown
		time.Sleep(foRetry)
		return false
	default:
		wr.out = crashUnknown
		w.wrong(r, fmt.Sprintf("write under %v", g))
		return false
	}
}

// renew: false when the renew's fate is unknown.
func (w *foWorker) renew(g *foGrant) bool {
	r := w.send("/v1/renew", map[string]any{"client": w.client, "lock": g.lock, "ttl": foTTL})
	res, renewed := crashResult[lk.RenewResult](r.crashAnswer)
	switch {
	case renewed && res.Outcome == lk.Renewed:
		if res.Token != g.token || res.GrantedAt != g.grantedAt {
			w.wrong(r, fmt.Sprintf("renew of %v: the token and the start (%d) must stay", g, g.grantedAt))
			return false
		}
		g.expires = res.ExpiresAt
		w.ops = append(w.ops, foTS{ts: res.ExpiresAt - foTTL, sent: r.sent, recv: r.recv, what: r.what})
		return true
	case r.unavailable():
		time.Sleep(foRetry)
		return false
	case r.isErr(http.StatusConflict, lk.CodeNotHolder) && !foSurelyLive(r.recv, g.expires):
		return false
	default:
		w.wrong(r, fmt.Sprintf("renew of %v", g))
		return false
	}
}

// settle clears what the client may have left on lock: a lease, g if
// known, or a queue entry. sure: the client's last answer on the lock was
// definite (it holds g, or with g nil it is queued), with no 503 since.
func (w *foWorker) settle(lock string, g *foGrant, sure bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := w.send("/v1/release", map[string]any{"client": w.client, "lock": lock})
		switch {
		case r.unavailable():
			if time.Now().After(deadline) {
				w.wrong(r, "still unavailable 30 s on")
				return false
			}
			sure = false
			time.Sleep(foRetry)
			continue
		case r.is(lk.Released):
		case r.is(lk.Withdrawn):
			// A client that held a lease never queued for the lock since.
			if g != nil {
				w.wrong(r, fmt.Sprintf("settling %v", g))
			}
		case r.isErr(http.StatusConflict, lk.CodeNotHolder):
			switch {
			case sure && g == nil:
				w.wrong(r, "withdrawing from "+lock+" after a queued answer")
			case sure && foSurelyLive(r.recv, g.expires):
				w.wrong(r, fmt.Sprintf("settling %v", g))
			}
		default:
			w.wrong(r, "settling "+lock)
			return false
		}
		return true
	}
}

// --- the test ---

type foWaiter struct {
	client, lock string
	server, wait int
	r            *foAnswer
}

func TestFailoverToStandby(t *testing.T) {
	script := foScript(t)
	began := time.Now()
	bin := buildBinary(t)
	c := &foCluster{t: t, pg: startFOPG(t, script)}
	// The timeout is above the longest wait asked for: only a hang runs into it.
	c.hc = crashHTTPClient(t, &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 32, DisableCompression: true},
		time.Duration(foWaitLong+15)*time.Second)
	dsn := c.pg.dsn()
	for i := range c.srv {
		c.srv[i] = startCrashServer(t, bin, dsn)
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d; servers on %s", seed, dsn)

	// The holders of the locks the blocked acquires wait for.
	holders := map[string]*foGrant{}
	for i, lock := range []string{foLockWoken, foLockRecheck, foLockTimeout} {
		client := "holder-" + strings.TrimPrefix(lock, "fo/blocked-")
		r := c.post(i%2, "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 60})
		res, ok := crashGrantedOf(r.crashAnswer)
		if !ok {
			t.Fatalf("holder: %v", r)
		}
		holders[lock] = &foGrant{client: client, lock: lock, token: res.Token, grantedAt: res.GrantedAt, expires: res.ExpiresAt,
			server: r.server, sent: r.sent, recv: r.recv}
	}
	// Each waits on the server the release does not go through, so that
	// only the notification, or the recheck after a lost one, answers it.
	waiters := []*foWaiter{
		{client: "waiter-woken", lock: foLockWoken, server: 1, wait: foWaitLong},
		{client: "waiter-recheck", lock: foLockRecheck, server: 1, wait: foWaitLong},
		{client: "waiter-timeout", lock: foLockTimeout, server: 0, wait: foWaitTimeout},
	}
	var wwg sync.WaitGroup
	for _, wt := range waiters {
		wwg.Go(func() {
			wt.r = c.post(wt.server, "/v1/acquire", map[string]any{"client": wt.client, "lock": wt.lock, "ttl": 60, "wait": wt.wait})
		})
	}
	testutil.Eventually(t, 10*time.Second, "the three waiters are queued", func() bool {
		r := c.get(0, "/v1/locks", url.Values{"prefix": {"fo/blocked-"}})
		res, _ := crashResult[lk.LocksResult](r.crashAnswer)
		queued := 0
		for _, e := range res.Locks {
			if e.Waiting == 1 && strings.HasPrefix(e.Lock, "fo/blocked-") {
				queued++
			}
		}
		return queued == 3
	})

	// The load, and a poller of each server's clock.
	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	workers := make([]*foWorker, foClients)
	var lwg sync.WaitGroup
	loadStart := time.Now()
	for i := range workers {
		w := &foWorker{c: c, client: fmt.Sprintf("c%d", i), rng: rand.New(rand.NewPCG(uint64(seed), uint64(i)))}
		workers[i] = w
		lwg.Go(func() { w.loop(ctx) })
	}
	pollCtx, stopPoll := context.WithCancel(context.Background())
	defer stopPoll()
	var clocks [2][]*foAnswer
	var pwg sync.WaitGroup
	for s := range c.srv {
		pwg.Go(func() {
			for pollCtx.Err() == nil {
				clocks[s] = append(clocks[s], c.get(s, "/v1/health", nil))
				time.Sleep(foHealth)
			}
		})
	}

	// Somewhere else in a group commit each run.
	jitter := time.Duration(rand.New(rand.NewPCG(uint64(seed), 0)).Int64N(int64(time.Second))) - time.Second/2
	time.Sleep(time.Until(loadStart.Add(foBefore + jitter)))
	c.down.Store(true)
	crashAt := time.Now()
	c.pg.must("crash", c.pg.primary)
	crashed := time.Now()
	time.Sleep(foGap)
	c.pg.must("promote", c.pg.standby)
	promoted := time.Now()
	t.Logf("primary stopped (immediate) %v into the load, in %v; standby promoted %v after that, in %v",
		crashAt.Sub(loadStart).Round(time.Millisecond), crashed.Sub(crashAt).Round(time.Millisecond),
		promoted.Sub(crashed).Round(time.Millisecond), promoted.Sub(crashed.Add(foGap)).Round(time.Millisecond))

	// The releases the blocked acquires wait for, through the server A.
	released := map[string]*foAnswer{}
	release := func(lock string) {
		h := holders[lock]
		r, err := c.settle(0, h.client, lock, 20*time.Second)
		if err != nil || !r.is(lk.Released) {
			t.Errorf("releasing %v after the failover: %v %v", h, r, err)
		}
		released[lock] = r
	}
	release(foLockRecheck)
	time.Sleep(time.Until(promoted.Add(2 * time.Second)))
	release(foLockWoken)

	time.Sleep(time.Until(crashAt.Add(foAfter)))
	stopLoad()
	loadDone := make(chan struct{})
	go func() { lwg.Wait(); wwg.Wait(); close(loadDone) }()
	select {
	case <-loadDone:
	case <-time.After(45 * time.Second):
		t.Fatal("the clients or the waiters did not finish within 45 s of the end of the load")
	}
	loadEnd := time.Now()
	stopPoll()
	pwg.Wait()

	ck := &foCheck{capped: capped{t: t}, c: c, crashAt: crashAt, promoted: promoted}
	for _, w := range workers {
		for _, e := range w.errs {
			ck.failf("during the load: %s", e)
		}
		ck.grants = append(ck.grants, w.grants...)
		ck.writes = append(ck.writes, w.writes...)
		ck.ops = append(ck.ops, w.ops...)
	}
	for _, h := range holders {
		ck.grants = append(ck.grants, h)
	}
	ck.checkWaiters(waiters, holders, released)
	ck.checkAnswers()
	ck.checkClocks(clocks)
	ck.checkTime()
	ck.checkTokens()
	ck.checkAfter()
	ck.summary(loadStart, loadEnd)
	ck.finish()
	t.Logf("test body took %v", time.Since(began).Round(time.Millisecond))
}

// --- the checks ---

type foCheck struct {
	capped
	c                 *foCluster
	crashAt, promoted time.Time
	grants            []*foGrant
	writes            []*msWrite
	ops               []foTS
	lastUnavail       [2]time.Time // when each server's last 503 came
	unavail           [2]int
}

func (ck *foCheck) checkWaiters(waiters []*foWaiter, holders map[string]*foGrant, released map[string]*foAnswer) {
	for _, wt := range waiters {
		r, h := wt.r, holders[wt.lock]
		if r == nil {
			ck.failf("%s: no answer recorded", wt.client)
			continue
		}
		res, granted := crashGrantedOf(r.crashAnswer)
		token := res.Token
		switch wt.lock {
		case foLockTimeout:
			// Its wait ran out after the promotion: it reads the state, and
			// is still first in line behind the holder.
			if q, ok := crashQueuedOf(r.crashAnswer); !ok || q.Position != 1 || len(q.Victims) != 0 {
				ck.failf("%s, waiting %d s across the failover: want {\"outcome\": \"queued\", \"position\": 1} when its wait ran out: %v", wt.client, wt.wait, r)
			} else if d := r.recv.Sub(r.sent) - time.Duration(wt.wait)*time.Second; d < -time.Second || d > 2*time.Second {
				ck.failf("%s: answered queued %v off its wait of %d s: %v", wt.client, d.Round(time.Millisecond), wt.wait, r)
			}
			ck.t.Logf("%s on server %c: %s after %v", wt.client, 'A'+wt.server, r.raw, r.recv.Sub(r.sent).Round(time.Millisecond))
			// Out of the queue, and the holder's lease ended, so that
			// every lock is free for checkAfter.
			if rr, err := ck.c.settle(wt.server, wt.client, wt.lock, 10*time.Second); err != nil || !rr.is(lk.Withdrawn) {
				ck.failf("withdrawing %s after its wait: %v %v", wt.client, rr, err)
			}
			if rr, err := ck.c.settle(h.server, h.client, h.lock, 10*time.Second); err != nil || !rr.is(lk.Released) {
				ck.failf("releasing %v: %v %v", h, rr, err)
			}
		default:
			rel := released[wt.lock]
			if !granted || token != h.token+1 {
				ck.failf("%s, blocked across the failover on %s, whose holder (%v) released it after the promotion (%v): want granted token %d, got %v",
					wt.client, wt.lock, h, rel, h.token+1, r)
			} else {
				ck.grants = append(ck.grants, &foGrant{client: wt.client, lock: wt.lock, token: token, grantedAt: res.GrantedAt,
					expires: res.ExpiresAt, server: wt.server, sent: r.sent, recv: r.recv})
				late := r.recv.Sub(rel.recv)
				if late > 5*time.Second {
					ck.failf("%s: granted %v after the release was acknowledged, not by news of it: %v", wt.client, late.Round(time.Millisecond), r)
				}
				ck.t.Logf("%s on server %c: granted token %d %v after the release through server A was acknowledged (%v after the promotion)",
					wt.client, 'A'+wt.server, token, late.Round(time.Millisecond), rel.recv.Sub(ck.promoted).Round(time.Millisecond))
			}
			if rr, err := ck.c.settle(wt.server, wt.client, wt.lock, 10*time.Second); err != nil || !rr.is(lk.Released) {
				ck.failf("releasing %s's lease: %v %v", wt.client, rr, err)
			}
		}
	}
}

// checkAnswers: every answer expected, 503 only between the crash and
// foRecoverBy after the promotion, and none slow.
func (ck *foCheck) checkAnswers() {
	ck.c.mu.Lock()
	reqs := slices.Clone(ck.c.reqs)
	ck.c.mu.Unlock()
	for _, r := range reqs {
		if r.path != "/v1/acquire" || !strings.Contains(r.what, `"wait"`) {
			if d := r.recv.Sub(r.sent); d > foSlowest {
				ck.failf("answered after %v (over the servers' 10 s lock timeout): %v", d.Round(time.Millisecond), r)
			}
		}
		switch {
		case r.status == http.StatusServiceUnavailable:
			if !r.unavailable() {
				ck.failf("a 503 other than {\"error\": \"unavailable\"} with Retry-After: 1 (Retry-After %q): %v", r.retryAfter, r)
			}
			ck.unavail[r.server]++
			if r.recv.After(ck.lastUnavail[r.server]) {
				ck.lastUnavail[r.server] = r.recv
			}
			if r.recv.Before(ck.crashAt) {
				ck.failf("unavailable before the primary stopped: %v", r)
			}
			if r.sent.After(ck.promoted.Add(foRecoverBy)) {
				ck.failf("still unavailable, sent %v after the promotion: %v", r.sent.Sub(ck.promoted).Round(time.Millisecond), r)
			}
		case r.err != nil || r.bad != nil || r.status >= 500:
			// The workers report these with their context; the rest of
			// the test's requests too, here.
			ck.failf("%v", r)
		}
	}
	for s := range ck.unavail {
		if ck.unavail[s] == 0 {
			ck.failf("server %c never answered unavailable: the failover did not reach it", 'A'+s)
		}
	}
}

// checkClocks: /v1/health always answers (it does not touch the database),
// and its clock never decreases.
func (ck *foCheck) checkClocks(clocks [2][]*foAnswer) {
	for s, rs := range clocks {
		last := int64(0)
		for _, r := range rs {
			h, ok := crashResult[lk.HealthResult](r.crashAnswer)
			if !ok || h.Status != "ok" || h.Clock == nil {
				ck.failf("health of server %c: %v", 'A'+s, r)
				continue
			}
			clock := *h.Clock
			if clock < last {
				ck.failf("server %c's clock went back from %d to %d: %v", 'A'+s, last, clock, r)
			}
			last = clock
		}
		ck.t.Logf("server %c: %d health polls, clock never decreased, last %d", 'A'+s, len(rs), last)
	}
}

// checkTime: an operation asked for after another was answered ran at a ts
// at least as high, whichever servers ran them.
func (ck *foCheck) checkTime() {
	ops := slices.Clone(ck.ops)
	slices.SortFunc(ops, func(a, b foTS) int { return a.recv.Compare(b.recv) })
	best := make([]int, len(ops)) // index of the highest ts among ops[:i+1]
	for i := range ops {
		best[i] = i
		if i > 0 && ops[best[i-1]].ts > ops[i].ts {
			best[i] = best[i-1]
		}
	}
	for _, o := range ops {
		i := sort.Search(len(ops), func(i int) bool { return !ops[i].recv.Before(o.sent) }) - 1
		if i >= 0 && ops[best[i]].ts > o.ts {
			p := ops[best[i]]
			ck.failf("time ran backwards: %s (sent %s) ran at %d, after %s (answered %s) ran at %d",
				o.what, crashClock(o.sent), o.ts, p.what, crashClock(p.recv), p.ts)
		}
	}
}

// checkTokens: on each lock, one grant per token, in grant order, across the failover.
func (ck *foCheck) checkTokens() {
	byLock := map[string][]*foGrant{}
	for _, g := range ck.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	for lock, gs := range byLock {
		slices.SortFunc(gs, func(a, b *foGrant) int { return cmp.Compare(a.token, b.token) })
		for i := 1; i < len(gs); i++ {
			if gs[i].token == gs[i-1].token {
				ck.failf("%s: token %d acknowledged twice: to %v and to %v", lock, gs[i].token, gs[i-1], gs[i])
			}
		}
		// Walking down the tokens, keep the earliest answer among the
		// higher ones: it may not come before a lower one was asked for.
		var first *foGrant
		for i := len(gs) - 1; i >= 0; i-- {
			g := gs[i]
			if first != nil && first.recv.Before(g.sent) {
				ck.failf("%s: %v was answered before %v was asked for, yet has the higher token", lock, first, g)
			}
			if first == nil || g.recv.Before(first.recv) {
				first = g
			}
		}
	}
}

// checkAfter reads the store back through both servers, then takes every
// lock anew through each: tokens above all acknowledged ones, and the fence
// where the acknowledged writes left it.
func (ck *foCheck) checkAfter() {
	c := ck.c
	byKey := map[[2]string][]*msWrite{}
	maxWrite := map[string]int64{}
	for _, w := range ck.writes {
		k := [2]string{w.lock, w.key}
		byKey[k] = append(byKey[k], w)
		if w.out == crashAcked {
			maxWrite[w.lock] = max(maxWrite[w.lock], w.token)
		}
	}
	// Of the keys written only before the crash: how many read back the old
	// primary's last acknowledged write, and how many a later write whose
	// answer was a 503 (its commit reached the standby).
	survived, cutOff, beforeKeys := 0, 0, 0
	for k, ws := range byKey {
		slices.SortFunc(ws, func(a, b *msWrite) int { return a.sent.Compare(b.sent) })
		// Every write to a key of the first kind was sent before the
		// crash: its last acknowledged one came from the old primary.
		var lastAcked *msWrite
		for _, w := range ws {
			if w.out == crashAcked {
				lastAcked = w
			}
		}
		if strings.HasSuffix(k[1], "/before") {
			beforeKeys++
		}
		for s := range c.srv {
			r := c.get(s, "/v1/read", url.Values{"lock": {k[0]}, "key": {k[1]}})
			got, err := crashValueOf(r.crashAnswer)
			if err != nil {
				ck.failf("read %s/%s after the failover: %v: %v", k[0], k[1], r, err)
				continue
			}
			if why := msJudgeOwn(ws, got); why != "" {
				ck.failf("%s/%s read through server %c after the failover: %s", k[0], k[1], 'A'+s, why)
			} else if s == 0 && strings.HasSuffix(k[1], "/before") && got != nil {
				switch {
				case lastAcked != nil && *got == lastAcked.value:
					survived++
				case slices.ContainsFunc(ws, func(w *msWrite) bool { return w.out == crashUnknown && w.value == *got }):
					cutOff++
				}
			}
		}
	}
	ck.t.Logf("store: %d keys read back through both servers; %d written only before the primary stopped: "+
		"%d hold the last write the old primary acknowledged, %d a later write answered 503 that did commit",
		len(byKey), beforeKeys, survived, cutOff)

	maxGrant := map[string]int64{}
	for _, g := range ck.grants {
		maxGrant[g.lock] = max(maxGrant[g.lock], g.token)
	}
	for i := range foLocks {
		lock := foLockName(i)
		for s := range c.srv {
			client := fmt.Sprintf("after-%c", 'A'+s)
			r := c.post(s, "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 30})
			res, ok := crashGrantedOf(r.crashAnswer)
			if !ok {
				ck.failf("acquire %s after the failover: %v", lock, r)
				continue
			}
			token := res.Token
			if token <= maxGrant[lock] {
				ck.failf("%s: grant after the failover has token %d, not above %d acknowledged before", lock, token, maxGrant[lock])
			}
			maxGrant[lock] = token
			if h := maxWrite[lock]; h > 1 {
				r := c.post(s, "/v1/write", map[string]any{"lock": lock, "key": "stale-probe", "value": "x", "token": h - 1})
				if !r.isErr(http.StatusConflict, lk.CodeStaleToken) {
					ck.failf("%s: write with token %d, below the acknowledged %d, after the failover: %v (want 409 stale token)", lock, h-1, h, r)
				}
			}
			if r := c.post(s, "/v1/write", map[string]any{"lock": lock, "key": "after", "value": client, "token": token}); !r.is(lk.OK) {
				ck.failf("%s: write with the new token %d: %v", lock, token, r)
			}
			if r := c.post(s, "/v1/release", map[string]any{"client": client, "lock": lock}); !r.is(lk.Released) {
				ck.failf("%s: release after the failover: %v", lock, r)
			}
		}
	}
}

func (ck *foCheck) summary(loadStart, loadEnd time.Time) {
	var before, outage, after int
	for _, g := range ck.grants {
		switch {
		case g.recv.Before(ck.crashAt):
			before++
		case g.sent.Before(ck.promoted):
			outage++
		default:
			after++
		}
	}
	acked, refused, unknown := 0, 0, 0
	for _, w := range ck.writes {
		switch w.out {
		case crashAcked:
			acked++
		case crashRefused:
			refused++
		default:
			unknown++
		}
	}
	ck.c.mu.Lock()
	n := len(ck.c.reqs)
	ck.c.mu.Unlock()
	ck.t.Logf("load %v, %d clients, %d requests in the whole test; 503 unavailable: %d from A, %d from B",
		loadEnd.Sub(loadStart).Round(time.Millisecond), foClients, n, ck.unavail[0], ck.unavail[1])
	for s, last := range ck.lastUnavail {
		if !last.IsZero() {
			ck.t.Logf("server %c: last 503 answered %v after the primary stopped, %v after .ci/postgres promote returned", 'A'+s,
				last.Sub(ck.crashAt).Round(time.Millisecond), last.Sub(ck.promoted).Round(time.Millisecond))
		}
	}
	ck.t.Logf("grants acknowledged: %d before the primary stopped, %d asked for before the promotion and answered after the stop, %d after the promotion",
		before, outage, after)
	ck.t.Logf("writes: %d acknowledged, %d refused as stale, %d of unknown fate (503)", acked, refused, unknown)
	if before < 10 || after < 10 {
		ck.failf("too little load to judge: %d grants before the failover, %d after", before, after)
	}
}
