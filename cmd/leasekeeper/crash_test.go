package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
)

// The crash test runs `leasekeeper serve` as a real process, drives it over
// HTTP from many goroutines, kills it with SIGKILL in the middle of the load,
// restarts it on the same database file and checks that nothing the server
// acknowledged (an HTTP 200 answer) was lost or contradicted:
//
//   - every (lock, key) of the fenced store reads back the value of the last
//     acknowledged write with the highest token, or of a write that was in
//     flight at the crash with a token at least as high (a request with no
//     answer may or may not have happened); after the restart the fence still
//     refuses a token below the highest acknowledged write;
//   - no (lock, token) was handed to two grants (acknowledged grants and
//     holders shown by inspect alike), tokens follow grant order, and new
//     grants after the restart get tokens above every token seen before it;
//   - a lock never had an exclusive holder beside another holder, judged from
//     inspect polls before and after the crash and from the acknowledged grants
//     and releases themselves (timestamps taken around each request bound when
//     the server can have acted);
//   - an acknowledged grant not yet released (and not lapsed) is still held
//     after the restart, and an acknowledged release is not undone;
//   - the audit log of both runs, replayed into the holders of each lock,
//     has every acknowledged grant and release and no overlap
//     (crash_audit_test.go).
//
// Every client holds at most one lock and waits only while it holds none, so
// no deadlock or busy answer is expected: any answer other than the ones the
// load expects fails the test. The seed and the moment of the kill are logged;
// the timing of a run cannot be replayed, the checks hold for any timing.
const (
	crashWorkers   = 32
	crashLocks     = 20
	crashKeys      = 4
	crashLoad      = 3 * time.Second
	crashEarliest  = 1500 * time.Millisecond // kill at a random moment in [earliest, earliest+spread)
	crashSpread    = 1000 * time.Millisecond
	crashPollers   = 2
	crashMaxErrors = 40 // failures reported one by one; the rest are counted
)

// crashOutcome is what a request's answer said about whether it happened.
type crashOutcome int

const (
	crashNotSent crashOutcome = iota
	crashAcked                // 200 with the expected result: it happened
	crashRefused              // a contract error: it did not happen
	crashUnknown              // no answer (in flight at the crash): it may or may not have happened
)

// crashGrant is an acknowledged {"outcome": "granted", ...} and what became
// of its release.
type crashGrant struct {
	client, lock, mode  string
	ttl, token, expires int64
	sent, recv          time.Time // the acquire request
	rel                 crashOutcome
	relBody             string
	relSent, relRecv    time.Time
}

// start is the lease's first instant (L2, L3: expires_at - ttl, for grants
// on the spot and from the queue alike).
func (g *crashGrant) start() int64 { return g.expires - g.ttl }

func (g *crashGrant) String() string {
	return fmt.Sprintf("%s %s token %d [%d, %d) acquire answered at %s",
		g.client, g.mode, g.token, g.start(), g.expires, crashClock(g.recv))
}

// crashWrite is one store write and its answer.
type crashWrite struct {
	lock, key, value string
	token            int64
	g                *crashGrant // the grant whose token it carries
	out              crashOutcome
	body             string
	sent, recv       time.Time
}

// crashSeen is who held a (lock, token), and where the test saw it.
type crashSeen struct {
	client, mode string
	src          string
}

// crashRun is everything the load recorded.
type crashRun struct {
	mu          sync.Mutex
	grants      []*crashGrant
	writes      []*crashWrite
	loadErrors  []string
	unackedHold int // queued acquires that became leases before their withdrawal
	polls       int
	pollSeen    []crashHolder
}

// crashHolder is one entry of a holders list: {client, mode, token, expires_at}.
type crashHolder struct {
	lock, client, mode string
	token, expires     int64
	at                 time.Time // when the answer that showed it came
}

func TestCrashRecovery(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	db, audit := filepath.Join(dir, "crash.db"), filepath.Join(dir, "audit.jsonl")
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	t.Logf("seed %d", seed)

	srv := startCrashServer(t, bin, db, "--audit-log", audit)
	hc := crashHTTPClient(t, &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 64, DisableCompression: true}, 10*time.Second)

	run := &crashRun{}
	loadCtx, stopLoad := context.WithTimeout(context.Background(), crashLoad)
	defer stopLoad()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range crashWorkers {
		wk := &crashWorker{
			api:    crashAPI{hc: hc, base: srv.base},
			client: fmt.Sprintf("w%d", w),
			rng:    rand.New(rand.NewPCG(uint64(seed), uint64(100+w))),
			run:    run,
		}
		wg.Go(func() { wk.loop(loadCtx) })
	}
	for p := range crashPollers {
		a := crashAPI{hc: hc, base: srv.base}
		wg.Go(func() { run.poll(loadCtx, a, p) })
	}

	crashAt := crashEarliest + time.Duration(rng.Int64N(int64(crashSpread)))
	time.Sleep(time.Until(start.Add(crashAt)))
	if err := srv.kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	crashed := time.Now()
	stopLoad()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the load did not stop within 15 s of the crash")
	}
	t.Logf("killed the server %v into the load", crashed.Sub(start).Round(time.Millisecond))

	c := &crashCheck{capped: capped{t: t}, run: run}
	c.summarize()
	if len(run.grants) < 10 || c.count(crashAcked) < 10 {
		t.Fatalf("the load did too little before the crash to check anything: %d grants, %d writes acknowledged",
			len(run.grants), c.count(crashAcked))
	}
	c.checkLoad()

	srv2 := startCrashServer(t, bin, db, "--audit-log", audit)
	c.checkAfterRestart(crashAPI{hc: hc, base: srv2.base}, audit, 2)
	c.logTokens()
	c.finish()
}

// crashWorker is one client of the load: acquire a random lock, write a few
// keys with the token, release; withdraw when queued.
type crashWorker struct {
	api    crashAPI
	client string
	rng    *rand.Rand
	run    *crashRun
	seq    int
	// what this worker recorded, merged into run at the end
	grants  []*crashGrant
	writes  []*crashWrite
	errs    []string
	unacked int
}

func (w *crashWorker) loop(ctx context.Context) {
	defer func() {
		w.run.mu.Lock()
		w.run.grants = append(w.run.grants, w.grants...)
		w.run.writes = append(w.run.writes, w.writes...)
		w.run.loadErrors = append(w.run.loadErrors, w.errs...)
		w.run.unackedHold += w.unacked
		w.run.mu.Unlock()
	}()
	for ctx.Err() == nil {
		if !w.once(ctx) {
			return
		}
	}
}

// once runs one acquire and what follows it; false once the server stopped
// answering.
func (w *crashWorker) once(ctx context.Context) bool {
	lock := crashLockName(w.rng.IntN(crashLocks))
	mode := "exclusive"
	if w.rng.IntN(4) == 0 {
		mode = "shared"
	}
	ttl := int64(5 + w.rng.IntN(26))
	r := w.api.post(ctx, "/v1/acquire", map[string]any{
		"client": w.client, "lock": lock, "ttl": ttl, "mode": mode, "wait": w.rng.IntN(2)})
	if r.err != nil {
		return false
	}
	res, granted := crashGrantedOf(r)
	_, queued := crashQueuedOf(r)
	token := res.Token
	switch {
	case granted:
		g := &crashGrant{client: w.client, lock: lock, mode: mode, ttl: ttl, token: token, expires: res.ExpiresAt, sent: r.sent, recv: r.recv}
		w.grants = append(w.grants, g)
		if res.GrantedAt != g.start() {
			// A lease lasts its ttl from its start, on the spot or from the queue (L2, L3).
			w.errs = append(w.errs, fmt.Sprintf("acquire %s %s by %s with ttl %d: granted_at %d, not expires_at - ttl: %s",
				mode, lock, w.client, ttl, res.GrantedAt, r.raw))
		}
		for range 1 + w.rng.IntN(3) {
			wr := &crashWrite{lock: lock, key: fmt.Sprintf("k%d", w.rng.IntN(crashKeys)), token: token, g: g,
				value: fmt.Sprintf("%s#%d#t%d", w.client, w.seq, token)}
			w.seq++
			w.writes = append(w.writes, wr)
			r := w.api.post(ctx, "/v1/write", map[string]any{"lock": lock, "key": wr.key, "value": wr.value, "token": token})
			wr.sent, wr.recv, wr.body = r.sent, r.recv, r.raw
			switch {
			case r.err != nil:
				wr.out = crashUnknown
				return false
			case r.is(lk.OK):
				wr.out = crashAcked
			case r.isErr(http.StatusConflict, lk.CodeStaleToken):
				wr.out = crashRefused
			default:
				wr.out = crashUnknown
				w.errs = append(w.errs, fmt.Sprintf("write %s/%s token %d: %d %s", lock, wr.key, token, r.status, r.raw))
				return false
			}
		}
		r := w.api.post(ctx, "/v1/release", map[string]any{"client": w.client, "lock": lock})
		g.relSent, g.relRecv, g.relBody = r.sent, r.recv, r.raw
		switch {
		case r.err != nil:
			g.rel = crashUnknown
			return false
		case r.is(lk.Released):
			g.rel = crashAcked
		default:
			g.rel = crashRefused // checked with the grants
		}
		return true
	case queued:
		// Still queued (wait 0, or wait 1 ran out): withdraw.
		r := w.api.post(ctx, "/v1/release", map[string]any{"client": w.client, "lock": lock})
		switch {
		case r.err != nil:
			return false
		case r.is(lk.Withdrawn):
		case r.is(lk.Released):
			w.unacked++ // granted between the answer and the withdrawal: a lease nobody was told about
		default:
			w.errs = append(w.errs, fmt.Sprintf("withdrawing %s from %s: %d %s", w.client, lock, r.status, r.raw))
			return false
		}
		return true
	default:
		// Each client holds at most one lock and waits only when it holds
		// none, so there is no deadlock, and it is never busy.
		w.errs = append(w.errs, fmt.Sprintf("acquire %s %s by %s: %d %s", mode, lock, w.client, r.status, r.raw))
		return false
	}
}

// poll inspects the locks in turn until the server stops answering.
func (run *crashRun) poll(ctx context.Context, a crashAPI, p int) {
	var obs []crashHolder
	var errs []string
	polls := 0
	defer func() {
		run.mu.Lock()
		run.pollSeen = append(run.pollSeen, obs...)
		run.loadErrors = append(run.loadErrors, errs...)
		run.polls += polls
		run.mu.Unlock()
	}()
	for i := p; ctx.Err() == nil; i++ {
		lock := crashLockName(i % crashLocks)
		r := a.get(ctx, "/v1/inspect", url.Values{"lock": {lock}})
		if r.err != nil {
			return
		}
		polls++
		holders, err := crashHoldersOf(r)
		if err != nil {
			errs = append(errs, fmt.Sprintf("inspect %s: %v", lock, err))
			return
		}
		if why := crashExclusiveBeside(holders); why != "" {
			errs = append(errs, fmt.Sprintf("inspect %s during the load (answered %s): %s: %s", lock, crashClock(r.recv), why, r.raw))
		}
		for _, h := range holders {
			h.lock, h.at = lock, r.recv
			obs = append(obs, h)
		}
	}
}

// crashCheck holds the checks' state and counts failures.
type crashCheck struct {
	capped
	run *crashRun
	// maxBefore is, per lock, the highest token acknowledged or seen held
	// before the crash.
	maxBefore map[string]int64
	// tokens: every (lock, token) seen granted or held, with its holder.
	tokens map[string]map[int64]crashSeen
}

// capped reports a check's failures one by one up to crashMaxErrors, and
// only counts the rest: one fault tends to fail a check many times over.
type capped struct {
	t        *testing.T
	failures int
}

func (c *capped) failf(format string, args ...any) {
	c.t.Helper()
	c.failures++
	if c.failures <= crashMaxErrors {
		c.t.Errorf(format, args...)
	}
}

func (c *capped) finish() {
	if c.failures > crashMaxErrors {
		c.t.Errorf("... and %d more failures", c.failures-crashMaxErrors)
	}
}

func (c *crashCheck) count(o crashOutcome) int {
	n := 0
	for _, w := range c.run.writes {
		if w.out == o {
			n++
		}
	}
	return n
}

func (c *crashCheck) summarize() {
	run := c.run
	rel := map[crashOutcome]int{}
	for _, g := range run.grants {
		rel[g.rel]++
	}
	c.t.Logf("before the crash: %d grants acknowledged (%d released, %d releases in flight, %d never released), "+
		"%d writes acknowledged, %d refused as stale, %d in flight; %d leases granted after a queued answer; %d inspect polls",
		len(run.grants), rel[crashAcked], rel[crashUnknown], rel[crashNotSent], c.count(crashAcked), c.count(crashRefused), c.count(crashUnknown),
		run.unackedHold, run.polls)
}

// checkLoad checks what the load itself saw, before the restart.
func (c *crashCheck) checkLoad() {
	for _, e := range c.run.loadErrors {
		c.failf("during the load: %s", e)
	}
	c.maxBefore = map[string]int64{}
	c.tokens = map[string]map[int64]crashSeen{}
	byLock := map[string][]*crashGrant{}
	for _, g := range c.run.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
		c.maxBefore[g.lock] = max(c.maxBefore[g.lock], g.token)
		// A release of a live lease we were granted must find it.
		if g.rel == crashRefused && g.relRecv.Unix() < g.expires {
			c.failf("%s: release of an acknowledged live lease (%v) answered %s", g.lock, g, g.relBody)
		}
	}
	// No (lock, token) given to two acknowledged grants.
	for lock, gs := range byLock {
		for _, g := range gs {
			c.note(lock, g.token, crashSeen{g.client, g.mode, fmt.Sprintf("acknowledged grant to %v", g)})
		}
	}
	for _, o := range c.run.pollSeen {
		c.maxBefore[o.lock] = max(c.maxBefore[o.lock], o.token)
		c.note(o.lock, o.token, crashSeen{o.client, o.mode, fmt.Sprintf("inspect before the crash, answered %s", crashClock(o.at))})
	}
	for lock, gs := range byLock {
		c.checkOverlaps(lock, gs)
	}
	// The fence: an exclusive holder's writes while its lease was live are
	// never stale (nobody else can hold a higher token yet).
	for _, w := range c.run.writes {
		if w.out == crashRefused && w.g.mode == "exclusive" && w.recv.Unix() < w.g.expires {
			c.failf("%s: write of %s with token %d by the exclusive holder (%v) refused as stale", w.lock, w.key, w.token, w.g)
		}
	}
}

// checkOverlaps: grants on one lock, at least one of them exclusive, never
// held at the same time. gs are the lock's acknowledged grants.
func (c *crashCheck) checkOverlaps(lock string, gs []*crashGrant) {
	slices.SortFunc(gs, func(a, b *crashGrant) int { return cmp.Compare(a.token, b.token) })
	for i, a := range gs {
		for _, b := range gs[i+1:] {
			// Tokens follow grant order: a grant answered before another
			// was asked for has the lower token.
			if b.recv.Before(a.sent) {
				c.failf("%s: %v was answered before %v was asked for, yet has the higher token", lock, b, a)
			}
			if a.mode == "shared" && b.mode == "shared" {
				continue
			}
			if b.start() >= a.expires {
				continue // a's lease had lapsed by the time b's began
			}
			// [a.start, a.expires) and [b.start, b.expires) overlap, so a
			// must have been released before b was granted: its release
			// sent before b's answer came, and not in a later second than
			// the one b's lease starts in (b starts at a's release or later).
			switch {
			case a.rel == crashNotSent || a.rel == crashRefused:
				c.failf("%s: %v granted while %v held it (never released)", lock, b, a)
			case !a.relSent.Before(b.recv):
				c.failf("%s: %v granted before the release of %v was sent (at %s)", lock, b, a, crashClock(a.relSent))
			case a.relSent.Unix() > b.start():
				c.failf("%s: %v starts before the release of %v was sent (at %s)", lock, b, a, crashClock(a.relSent))
			}
		}
	}
}

// note records that (lock, token) was held by s.client in s.mode, and fails
// if the pair was seen with another holder or mode, or granted twice.
func (c *crashCheck) note(lock string, token int64, s crashSeen) {
	m := c.tokens[lock]
	if m == nil {
		m = map[int64]crashSeen{}
		c.tokens[lock] = m
	}
	prev, ok := m[token]
	if !ok {
		m[token] = s
		return
	}
	twice := strings.HasPrefix(prev.src, "acknowledged grant") && strings.HasPrefix(s.src, "acknowledged grant")
	if prev.client != s.client || prev.mode != s.mode || twice {
		c.failf("%s: token %d issued twice: %s %s (%s) and %s %s (%s)", lock, token, prev.client, prev.mode, prev.src, s.client, s.mode, s.src)
	}
}

// checkHoldersAfter inspects every lock after the restart: no exclusive
// holder beside another; every acknowledged grant that was not released and
// has not lapsed is still held; no acknowledged release is undone.
// checkAfterRestart runs the checks of a server restarted after the
// crashes, through after: the holders and the store kept what was
// acknowledged, new grants follow the old tokens, and the audit log of the
// runs (the first one and one per restart) replays into the same holders.
func (c *crashCheck) checkAfterRestart(after crashAPI, audit string, runs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.checkHoldersAfter(ctx, after)
	c.checkStoreAfter(ctx, after)
	c.clearLocks(ctx, after)
	c.checkNewGrants(ctx, after)
	c.checkAudit(audit, runs)
}

func (c *crashCheck) checkHoldersAfter(ctx context.Context, a crashAPI) {
	for i := range crashLocks {
		lock := crashLockName(i)
		r := a.get(ctx, "/v1/inspect", url.Values{"lock": {lock}})
		holders, err := crashHoldersOf(r)
		if err != nil {
			c.failf("inspect %s after the restart: %v", lock, err)
			continue
		}
		if why := crashExclusiveBeside(holders); why != "" {
			c.failf("inspect %s after the restart: %s: %s", lock, why, r.raw)
		}
		held := map[[2]string]bool{}
		for _, h := range holders {
			held[[2]string{h.client, fmt.Sprint(h.token)}] = true
			c.note(lock, h.token, crashSeen{h.client, h.mode, "inspect after the restart"})
		}
		for _, g := range c.run.grants {
			if g.lock != lock {
				continue
			}
			there := held[[2]string{g.client, fmt.Sprint(g.token)}]
			switch {
			case g.rel == crashAcked && there:
				c.failf("%s: acknowledged release of %v undone by the crash: %s", lock, g, r.raw)
			case g.rel == crashNotSent && !there && r.recv.Unix() < g.expires:
				c.failf("%s: acknowledged grant %v, never released and not lapsed, lost in the crash: %s", lock, g, r.raw)
			}
		}
	}
}

// checkStoreAfter reads every key back and checks it holds what the
// acknowledged writes say it must.
func (c *crashCheck) checkStoreAfter(ctx context.Context, a crashAPI) {
	byKey := map[[2]string][]*crashWrite{}
	for _, w := range c.run.writes {
		k := [2]string{w.lock, w.key}
		byKey[k] = append(byKey[k], w)
	}
	checked := 0
	for i := range crashLocks {
		for k := range crashKeys {
			lock, key := crashLockName(i), fmt.Sprintf("k%d", k)
			r := a.get(ctx, "/v1/read", url.Values{"lock": {lock}, "key": {key}})
			got, err := crashValueOf(r)
			if err != nil {
				c.failf("read %s/%s after the restart: %d %s %v", lock, key, r.status, r.raw, err)
				continue
			}
			if why := crashJudgeValue(byKey[[2]string{lock, key}], got); why != "" {
				c.failf("%s/%s after the restart: %s", lock, key, why)
			}
			checked++
		}
	}
	c.t.Logf("after the restart: %d keys read back", checked)
}

// judgeValue says what is wrong with got (nil for null) as the value of a key
// whose writes were ws, or "" if nothing is. Allowed: the value of an
// acknowledged write with the highest acknowledged token H that no later
// acknowledged write (sent after it was answered) replaced, or of a write in
// flight at the crash with a token >= H; null only if no write was
// acknowledged.
func crashJudgeValue(ws []*crashWrite, got *string) string {
	var h int64
	for _, w := range ws {
		if w.out == crashAcked {
			h = max(h, w.token)
		}
	}
	var allowed []string
	for _, w := range ws {
		switch w.out {
		case crashUnknown:
			if w.token >= h {
				allowed = append(allowed, w.value)
			}
		case crashAcked:
			if w.token != h {
				continue
			}
			replaced := false
			for _, w2 := range ws {
				if w2 != w && w2.out == crashAcked && w2.token >= h && w2.sent.After(w.recv) {
					replaced = true
				}
			}
			if !replaced {
				allowed = append(allowed, w.value)
			}
		}
	}
	if got == nil {
		if h == 0 {
			return ""
		}
		return fmt.Sprintf("null, but writes up to token %d were acknowledged (allowed: %q)", h, allowed)
	}
	if slices.Contains(allowed, *got) {
		return ""
	}
	for _, w := range ws {
		if w.value != *got {
			continue
		}
		switch {
		case w.out == crashRefused:
			return fmt.Sprintf("value %q of a write refused as stale (token %d; allowed: %q)", *got, w.token, allowed)
		case w.token < h:
			return fmt.Sprintf("value %q written with token %d, but a write with token %d was acknowledged (allowed: %q)",
				*got, w.token, h, allowed)
		case w.out == crashAcked:
			return fmt.Sprintf("value %q of an acknowledged write with token %d that a later acknowledged write replaced (allowed: %q)",
				*got, w.token, allowed)
		}
	}
	return fmt.Sprintf("value %q that nobody wrote (allowed: %q)", *got, allowed)
}

// clearLocks releases every lease left after the restart (handing the locks
// to their waiters, which are released in turn) so that every lock can be
// granted anew.
func (c *crashCheck) clearLocks(ctx context.Context, a crashAPI) {
	for range 4 * crashWorkers {
		seen, failed := 0, false
		r, ok := a.crashLocks(ctx, func(r crashAnswer, list []lk.LockSummary) bool {
			for _, e := range list {
				seen++
				holders, err := crashParseHolders(e.Holders)
				if err != nil || e.Lock == "" {
					c.failf("locks after the restart: unexpected entry %+v: %v", e, err)
					failed = true
					return false
				}
				lock := e.Lock
				if why := crashExclusiveBeside(holders); why != "" {
					c.failf("locks after the restart, %s: %s: %s", lock, why, r.raw)
				}
				if len(holders) == 0 {
					// S3: a queue head is always granted on a free lock.
					c.failf("locks after the restart: %s has waiters and no holders: %s", lock, r.raw)
					failed = true
					return false
				}
				for _, h := range holders {
					c.note(lock, h.token, crashSeen{h.client, h.mode, "locks after the restart"})
					r := a.post(ctx, "/v1/release", map[string]any{"client": h.client, "lock": lock})
					if !r.is(lk.Released) {
						c.failf("releasing %s's lease on %s after the restart: %d %s %v %v", h.client, lock, r.status, r.raw, r.err, r.bad)
						failed = true
						return false
					}
				}
			}
			return true
		})
		if !ok {
			c.failf("locks after the restart: %d %s %v %v", r.status, r.raw, r.err, r.bad)
			return
		}
		if failed || seen == 0 {
			return
		}
	}
	c.failf("locks still held after %d rounds of releases", 4*crashWorkers)
}

// checkNewGrants takes every lock anew: the token must be above every token
// seen before the crash, the fence must still refuse a token below the
// highest acknowledged write, and accept the new one.
func (c *crashCheck) checkNewGrants(ctx context.Context, a crashAPI) {
	maxWrite := map[string]int64{}
	for _, w := range c.run.writes {
		if w.out == crashAcked {
			maxWrite[w.lock] = max(maxWrite[w.lock], w.token)
		}
	}
	for i := range crashLocks {
		lock := crashLockName(i)
		client := fmt.Sprintf("after-%d", i)
		r := a.post(ctx, "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 30})
		res, ok := crashGrantedOf(r)
		if !ok {
			c.failf("acquire %s after the restart: %d %s %v %v", lock, r.status, r.raw, r.err, r.bad)
			continue
		}
		token := res.Token
		if token <= c.maxBefore[lock] {
			c.failf("%s: first grant after the restart has token %d, not above %d seen before the crash", lock, token, c.maxBefore[lock])
		}
		highest := int64(0)
		for t := range c.tokens[lock] {
			highest = max(highest, t)
		}
		if token <= highest {
			c.failf("%s: grant after the restart has token %d, not above %d seen held after the restart", lock, token, highest)
		}
		c.note(lock, token, crashSeen{client, "exclusive", "grant after the restart"})
		ir := a.get(ctx, "/v1/inspect", url.Values{"lock": {lock}})
		holders, err := crashHoldersOf(ir)
		if err != nil || len(holders) != 1 || holders[0].client != client || holders[0].token != token || holders[0].mode != "exclusive" {
			c.failf("%s: inspect after granting it to %s (token %d) after the restart: %s %v", lock, client, token, ir.raw, err)
		}
		if h := maxWrite[lock]; h > 1 {
			r := a.post(ctx, "/v1/write", map[string]any{"lock": lock, "key": "stale-probe", "value": "stale", "token": h - 1})
			if !r.isErr(http.StatusConflict, lk.CodeStaleToken) {
				c.failf("%s: write with token %d below the acknowledged %d after the restart: %d %s %v (want 409 stale token)",
					lock, h-1, h, r.status, r.raw, r.err)
			}
		}
		r = a.post(ctx, "/v1/write", map[string]any{"lock": lock, "key": "after", "value": "after", "token": token})
		if !r.is(lk.OK) {
			c.failf("%s: write with the new token %d after the restart: %d %s %v", lock, token, r.status, r.raw, r.err)
		}
	}
}

// logTokens reports how many (lock, token) pairs the checks compared.
func (c *crashCheck) logTokens() {
	n := 0
	for _, m := range c.tokens {
		n += len(m)
	}
	c.t.Logf("%d distinct (lock, token) pairs seen granted or held", n)
}

// --- the HTTP side ---

type crashAPI struct {
	hc   *http.Client
	base string
}

// crashHTTPClient is the tests' HTTP client: every answer it receives is
// checked against the API's OpenAPI document (docs/openapi.json), failing t
// on a mismatch. An answer cut off by a killed server comes back as a
// transport error, with nothing to check.
func crashHTTPClient(t *testing.T, base *http.Transport, timeout time.Duration) *http.Client {
	hc := &http.Client{Transport: apitest.New(t).Transport(t, base), Timeout: timeout}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// answer is one HTTP exchange. err is set when no complete answer came back:
// then the request may or may not have happened. An answer that came back
// whole is decoded into the result type of its operation (a 200) or into
// an error object (any other status); bad says why it could not be.
type crashAnswer struct {
	status     int
	result     any          // a 200's result: lk.AcquireResult, lk.ReleaseResult, ... by the request's path
	code       lk.ErrorCode // an error answer's "error"
	raw        string
	header     http.Header
	bad        error
	err        error
	sent, recv time.Time
}

// is: a 200 whose result has outcome o.
func (r crashAnswer) is(o lk.Outcome) bool {
	return r.err == nil && r.bad == nil && r.status == http.StatusOK && crashOutcomeOf(r.result) == o
}

// isErr: an error answer of status and code.
func (r crashAnswer) isErr(status int, code lk.ErrorCode) bool {
	return r.err == nil && r.bad == nil && r.status == status && r.code == code
}

// crashResult returns r's result when r is a 200 of result type T.
func crashResult[T any](r crashAnswer) (T, bool) {
	v, ok := r.result.(T)
	return v, ok && r.err == nil && r.bad == nil && r.status == http.StatusOK
}

func crashOutcomeOf(res any) lk.Outcome {
	switch v := res.(type) {
	case lk.AcquireResult:
		return v.Outcome
	case lk.RenewResult:
		return v.Outcome
	case lk.ReleaseResult:
		return v.Outcome
	case lk.RevokeResult:
		return v.Outcome
	case lk.WriteResult:
		return v.Outcome
	}
	return ""
}

// crashResultOf is a new result of the operation of path, to decode a 200
// into; nil for a path without one.
func crashResultOf(path string) any {
	switch path {
	case "/v1/acquire":
		return new(lk.AcquireResult)
	case "/v1/renew":
		return new(lk.RenewResult)
	case "/v1/release":
		return new(lk.ReleaseResult)
	case "/v1/revoke":
		return new(lk.RevokeResult)
	case "/v1/write":
		return new(lk.WriteResult)
	case "/v1/read":
		return new(lk.ReadResult)
	case "/v1/inspect":
		return new(lk.InspectResult)
	case "/v1/status":
		return new(lk.StatusResult)
	case "/v1/locks":
		return new(lk.LocksResult)
	case "/v1/health":
		return new(lk.HealthResult)
	}
	return nil
}

// crashDecode decodes raw, one JSON object and nothing after it, into v,
// refusing fields v does not have.
func crashDecode(raw string, v any) error {
	if !strings.HasPrefix(raw, "{") {
		return fmt.Errorf("answer %q is not a JSON object", raw)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("answer %q is not a %T: %w", raw, v, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("answer %q has more after its JSON object", raw)
	}
	return nil
}

func (a crashAPI) post(ctx context.Context, path string, fields map[string]any) crashAnswer {
	b, _ := json.Marshal(fields)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(b))
	if err != nil {
		return crashAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	return crashDo(a.hc, req)
}

func (a crashAPI) get(ctx context.Context, path string, q url.Values) crashAnswer {
	u := a.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return crashAnswer{err: err}
	}
	return crashDo(a.hc, req)
}

// crashDo sends req and decodes its answer.
func crashDo(hc *http.Client, req *http.Request) crashAnswer {
	var r crashAnswer
	r.sent = time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		r.err = err
		r.recv = time.Now()
		return r
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.recv = time.Now()
	r.status, r.raw, r.header = resp.StatusCode, strings.TrimSpace(string(raw)), resp.Header
	if err != nil {
		r.err = err
		return r
	}
	if r.status == http.StatusOK {
		res := crashResultOf(req.URL.Path)
		if res == nil {
			r.bad = fmt.Errorf("no result type for %s", req.URL.Path)
		} else if r.bad = crashDecode(r.raw, res); r.bad == nil {
			r.result = reflect.ValueOf(res).Elem().Interface()
		}
		return r
	}
	var e lk.Error
	if r.bad = crashDecode(r.raw, &e); r.bad == nil && e.Code == "" {
		r.bad = fmt.Errorf("error answer %q without an error code", r.raw)
	}
	r.code = e.Code
	return r
}

func crashLockName(i int) string { return fmt.Sprintf("crash/lock-%02d", i) }

func crashClock(t time.Time) string { return t.Format("15:04:05.000") }

// crashGrantedOf reads a 200 {"outcome": "granted", ...}.
func crashGrantedOf(r crashAnswer) (lk.AcquireResult, bool) {
	res, ok := crashResult[lk.AcquireResult](r)
	return res, ok && res.Outcome == lk.Granted
}

// crashQueuedOf reads a 200 {"outcome": "queued", "position": n}.
func crashQueuedOf(r crashAnswer) (lk.AcquireResult, bool) {
	res, ok := crashResult[lk.AcquireResult](r)
	return res, ok && res.Outcome == lk.Queued
}

// holdersOf reads the holders of a 200 inspect answer.
func crashHoldersOf(r crashAnswer) ([]crashHolder, error) {
	if r.err != nil {
		return nil, r.err
	}
	res, ok := crashResult[lk.InspectResult](r)
	if !ok {
		return nil, fmt.Errorf("answered %d %s %v", r.status, r.raw, r.bad)
	}
	return crashParseHolders(res.Holders)
}

// parseHolders reads [{client, mode, token, expires_at}, ...].
func crashParseHolders(list []lk.Holder) ([]crashHolder, error) {
	out := make([]crashHolder, 0, len(list))
	for _, h := range list {
		if h.Client == "" || (h.Mode != lk.Shared && h.Mode != lk.Exclusive) {
			return nil, fmt.Errorf("holder %+v is not {client, mode, token, expires_at}", h)
		}
		out = append(out, crashHolder{client: h.Client, mode: string(h.Mode), token: h.Token, expires: h.ExpiresAt})
	}
	return out, nil
}

// crashValueOf reads a 200 read answer: the value, nil for null. A value
// comes with the token of the write that stored it, which the tests' values
// end with ("...#t7"); null comes without one.
func crashValueOf(r crashAnswer) (*string, error) {
	if r.err != nil {
		return nil, r.err
	}
	res, ok := crashResult[lk.ReadResult](r)
	switch {
	case !ok:
		return nil, fmt.Errorf("answered %d %s %v", r.status, r.raw, r.bad)
	case res.Value == nil && res.Token != 0:
		return nil, fmt.Errorf("a null value with token %d: %s", res.Token, r.raw)
	case res.Value != nil && !strings.HasSuffix(*res.Value, fmt.Sprintf("#t%d", res.Token)):
		return nil, fmt.Errorf("value %q with token %d, not the token it was written with: %s", *res.Value, res.Token, r.raw)
	}
	return res.Value, nil
}

// crashLocks reads the locks listing page by page, handing each page to
// page with the answer it came in; false when an answer was not a page.
func (a crashAPI) crashLocks(ctx context.Context, page func(r crashAnswer, locks []lk.LockSummary) bool) (crashAnswer, bool) {
	q := url.Values{}
	for {
		r := a.get(ctx, "/v1/locks", q)
		res, ok := crashResult[lk.LocksResult](r)
		if !ok {
			return r, false
		}
		if !page(r, res.Locks) || res.Next == nil {
			return r, true
		}
		q.Set("after", *res.Next)
	}
}

// exclusiveBeside says what is wrong when an exclusive lease shares the lock.
func crashExclusiveBeside(holders []crashHolder) string {
	if len(holders) < 2 {
		return ""
	}
	for _, h := range holders {
		if h.mode == "exclusive" {
			return fmt.Sprintf("exclusive holder %s (token %d) beside %d other lease(s)", h.client, h.token, len(holders)-1)
		}
	}
	return ""
}

// --- the server process ---

type crashServer struct {
	cmd    *exec.Cmd
	base   string
	log    *crashLog
	exited chan struct{}
}

// startCrashServer starts `leasekeeper serve` on db at a free loopback port,
// with extra arguments, and waits for its address (http:// or, with a
// certificate, https://); t.Cleanup kills it if it still runs.
func startCrashServer(t *testing.T, bin, db string, extra ...string) *crashServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--db", db, "--listen", "127.0.0.1:0"}, extra...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting serve: %v", err)
	}
	p := &crashServer{cmd: cmd, log: &crashLog{}, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.log.WriteString(line + "\n")
			if rest, ok := strings.CutPrefix(line, "leasekeeper: listening on "); ok {
				if a, _, ok := strings.Cut(rest, " "); ok {
					select {
					case addr <- a:
					default:
					}
				}
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.kill(); err != nil {
			t.Errorf("stopping serve: %v", err)
		}
		if t.Failed() {
			t.Logf("serve --db %s said:\n%s", filepath.Base(db), p.log.String())
		}
	})
	select {
	case a := <-addr:
		u, err := url.Parse(a)
		if err != nil {
			t.Fatalf("serve listens on %q: %v", a, err)
		}
		host, _, err := net.SplitHostPort(u.Host)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			t.Fatalf("serve listens on %q, not a loopback address", a)
		}
		p.base = a
	case <-p.exited:
		t.Fatalf("serve exited before listening:\n%s", p.log.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("serve printed no address within 15 s:\n%s", p.log.String())
	}
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
// stop ends the server with SIGTERM and returns everything it logged.
func (p *crashServer) stop(t *testing.T) string {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	return p.log.String()
}

func (p *crashServer) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(os.Kill); err != nil {
		select {
		case <-p.exited:
			return nil
		default:
			return err
		}
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d still running 10 s after SIGKILL", p.cmd.Process.Pid)
	}
}

type crashLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *crashLog) WriteString(str string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(str)
}

func (s *crashLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
