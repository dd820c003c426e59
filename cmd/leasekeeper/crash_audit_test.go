package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// The audit log of a run with kill -9s, replayed into the sequence of
// holders of each lock. Its lines reach the file before their transaction
// commits, and a restart cancels (not_committed) the lines of a last
// transaction that a kill kept from committing, so the replay allows
// nothing: every grant line takes the lock's next token, no grant finds a
// holder it cannot share with, every end names a lease that is held; every
// acknowledged grant and release has its line, every holder an inspect
// showed was granted in the log, and at the end the log's holders are
// exactly the locks' holders.

// TestCrashAuditTwoKills runs the crash test's load through two kill -9s
// and restarts of `leasekeeper serve` on one database and one audit log,
// checks what the crash test checks, and replays the audit log.
func TestCrashAuditTwoKills(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	db, audit := filepath.Join(dir, "crash.db"), filepath.Join(dir, "audit.jsonl")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	hc := crashHTTPClient(t, &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 64, DisableCompression: true}, 10*time.Second)

	all := &crashRun{}
	srv := startCrashServer(t, bin, db, "--audit-log", audit)
	for k := range 2 {
		// Clients of their own each run: a client left holding a lock by
		// a kill would otherwise find itself busy, or in a deadlock.
		run := crashLoadUntilKill(t, hc, srv, fmt.Sprintf("r%d-", k), rand.New(rand.NewPCG(uint64(seed), uint64(k))),
			1000*time.Millisecond, 800*time.Millisecond)
		all.grants = append(all.grants, run.grants...)
		all.writes = append(all.writes, run.writes...)
		all.loadErrors = append(all.loadErrors, run.loadErrors...)
		all.pollSeen = append(all.pollSeen, run.pollSeen...)
		all.polls += run.polls
		all.unackedHold += run.unackedHold
		srv = startCrashServer(t, bin, db, "--audit-log", audit)
	}

	c := &crashCheck{capped: capped{t: t}, run: all}
	c.summarize()
	if len(all.grants) < 10 {
		t.Fatalf("the load did too little before the crashes to check anything: %d grants", len(all.grants))
	}
	c.checkLoad()
	c.checkAfterRestart(crashAPI{hc: hc, base: srv.base}, audit, 3)
	c.finish()
}

// crashLoadUntilKill drives srv with the crash test's workers (clients
// prefix+"w0", ...) and pollers and kills it at a random moment in
// [earliest, earliest+spread).
func crashLoadUntilKill(t *testing.T, hc *http.Client, srv *crashServer, prefix string, rng *rand.Rand, earliest, spread time.Duration) *crashRun {
	t.Helper()
	run := &crashRun{}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range crashWorkers {
		wk := &crashWorker{api: crashAPI{hc: hc, base: srv.base}, client: fmt.Sprintf("%sw%d", prefix, w),
			rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(100+w))), run: run}
		wg.Go(func() { wk.loop(loadCtx) })
	}
	for p := range crashPollers {
		a := crashAPI{hc: hc, base: srv.base}
		wg.Go(func() { run.poll(loadCtx, a, p) })
	}
	time.Sleep(time.Until(start.Add(earliest + time.Duration(rng.Int64N(int64(spread))))))
	if err := srv.kill(); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	t.Logf("killed the server %v into the load", time.Since(start).Round(time.Millisecond))
	stopLoad()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the load did not stop within 15 s of the crash")
	}
	return run
}

// auditEntry is one audit line (docs/observability.md).
type auditEntry struct {
	Msg       string    `json:"msg"`
	Group     int64     `json:"group"`
	Lock      string    `json:"lock"`
	Client    string    `json:"client"`
	Holder    string    `json:"holder"`
	Mode      string    `json:"mode"`
	Token     int64     `json:"token"`
	At        int64     `json:"at"`
	ExpiresAt int64     `json:"expires_at"`
	Source    string    `json:"source"`
	Lost      []lk.Hold `json:"lost"`
	line      int
	cancelled bool
}

// auditLease is a lease as the audit log tells it.
type auditLease struct {
	client, mode       string
	token, at, expires int64
	line               int
	ended              bool
}

// checkAudit replays the audit log at path, written by `runs` runs of the
// server, against what the load and the checks after the restarts saw. It
// must run after checkNewGrants: every lock is then held by its after-N
// client alone.
func (c *crashCheck) checkAudit(path string, runs int) {
	f, err := os.Open(path)
	if err != nil {
		c.failf("audit log: %v", err)
		return
	}
	defer f.Close()
	var raw []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		raw = append(raw, sc.Text())
	}
	if err := sc.Err(); err != nil {
		c.failf("reading the audit log: %v", err)
		return
	}
	var es []*auditEntry
	starts, cancelled := 0, 0
	for i, line := range raw {
		e := &auditEntry{line: i + 1}
		if err := json.Unmarshal([]byte(line), e); err != nil {
			// Only a kill cuts a line short, and the next run ends it.
			var next auditEntry
			if i+1 < len(raw) && json.Unmarshal([]byte(raw[i+1]), &next) == nil && next.Msg == "start" {
				c.t.Logf("audit line %d, cut short by a kill: %q", i+1, line)
				continue
			}
			c.failf("audit line %d is not JSON: %q", i+1, line)
			continue
		}
		switch e.Msg {
		case "start":
			starts++
		case "commit_failed", "not_committed":
			// Cancels the latest group of that number before it.
			n := 0
			for j := len(es) - 1; j >= 0; j-- {
				if es[j].Msg == "start" && n > 0 {
					break
				}
				switch {
				case es[j].Group == 0:
					// a refused request's line, or a start line
				case es[j].Group == e.Group:
					es[j].cancelled = true
					n++
				case n > 0:
					j = 0 // the group ended
				}
			}
			c.t.Logf("audit line %d: %s cancels %d lines of group %d", i+1, e.Msg, n, e.Group)
			cancelled += n
			continue
		}
		es = append(es, e)
	}
	if starts != runs {
		c.failf("the audit log has %d start lines, want one per run (%d)", starts, runs)
	}

	holders := map[string]map[string]*auditLease{} // by lock, then client
	leases := map[[2]any]*auditLease{}             // by lock and token
	lastToken := map[string]int64{}
	lastAt := map[string]int64{}
	released := map[[2]any]bool{} // (lock, token) of release lines
	grants := 0
	end := func(e *auditEntry, lock, client, mode string, token int64) {
		l := holders[lock][client]
		switch {
		case l == nil:
			c.failf("audit line %d: %s of %s's lease on %s (token %d), which the log shows no grant of", e.line, e.Msg, client, lock, token)
		case l.token != token || l.mode != mode:
			c.failf("audit line %d: %s of %s's %s lease on %s with token %d, but the log shows it holding %s token %d (line %d)",
				e.line, e.Msg, client, mode, lock, token, l.mode, l.token, l.line)
		default:
			l.ended = true
			delete(holders[lock], client)
		}
	}
	for _, e := range es {
		if e.cancelled || e.Msg == "start" {
			continue
		}
		if e.Lock != "" && e.Msg != "deadlock_abort" {
			if e.At < lastAt[e.Lock] {
				c.failf("audit line %d: %s on %s at %d, after a line at %d", e.line, e.Msg, e.Lock, e.At, lastAt[e.Lock])
			}
			lastAt[e.Lock] = max(lastAt[e.Lock], e.At)
		}
		switch e.Msg {
		case "grant":
			grants++
			if e.Mode != "shared" && e.Mode != "exclusive" {
				c.failf("audit line %d: grant without a mode: %+v", e.line, *e)
			}
			if e.Token != lastToken[e.Lock]+1 {
				c.failf("audit line %d: %s granted token %d on %s, after token %d (L5: the next, and every grant logged)",
					e.line, e.Client, e.Token, e.Lock, lastToken[e.Lock])
			}
			lastToken[e.Lock] = max(lastToken[e.Lock], e.Token)
			if holders[e.Lock] == nil {
				holders[e.Lock] = map[string]*auditLease{}
			}
			for _, h := range holders[e.Lock] {
				if e.Mode == "exclusive" || h.mode == "exclusive" || h.client == e.Client {
					c.failf("audit line %d: %s granted %s %s (token %d) while %s held it %s (token %d, line %d)",
						e.line, e.Client, e.Lock, e.Mode, e.Token, h.client, h.mode, h.token, h.line)
				}
			}
			l := &auditLease{client: e.Client, mode: e.Mode, token: e.Token, at: e.At, expires: e.ExpiresAt, line: e.line}
			holders[e.Lock][e.Client] = l
			leases[[2]any{e.Lock, e.Token}] = l
		case "lapse":
			end(e, e.Lock, e.Holder, e.Mode, e.Token)
		case "release", "revoke":
			end(e, e.Lock, e.Client, e.Mode, e.Token)
			released[[2]any{e.Lock, e.Token}] = e.Msg == "release"
		case "deadlock_abort":
			for _, h := range e.Lost {
				end(e, h.Lock, e.Client, string(h.Mode), h.Token)
			}
		case "withdraw", "stale_write", "auth_failure", "refusals_suppressed":
		default:
			c.failf("audit line %d: unexpected %q", e.line, e.Msg)
		}
	}

	// Every acknowledged grant and release is in the log, as answered.
	for _, g := range c.run.grants {
		l := leases[[2]any{g.lock, g.token}]
		switch {
		case l == nil:
			c.failf("%s: acknowledged grant %v has no audit line", g.lock, g)
		case l.client != g.client || l.mode != g.mode || l.expires != g.expires:
			c.failf("%s: acknowledged grant %v, but audit line %d grants token %d to %s %s until %d",
				g.lock, g, l.line, g.token, l.client, l.mode, l.expires)
		case g.rel == crashAcked && !released[[2]any{g.lock, g.token}]:
			c.failf("%s: acknowledged release of %v has no audit line", g.lock, g)
		}
	}
	// Every holder an inspect showed was granted in the log.
	for _, h := range c.run.pollSeen {
		if l := leases[[2]any{h.lock, h.token}]; l == nil || l.client != h.client || l.mode != h.mode {
			c.failf("%s: inspect showed %s holding %s token %d, which no audit line grants", h.lock, h.client, h.mode, h.token)
		}
	}
	// Nothing held that the log does not know of, and nothing the log
	// thinks held that is not: after checkNewGrants, lock i is held by
	// after-i alone.
	for i := range crashLocks {
		lock := crashLockName(i)
		want := fmt.Sprintf("after-%d", i)
		hs := holders[lock]
		if len(hs) != 1 || hs[want] == nil {
			var got []string
			for _, h := range hs {
				got = append(got, fmt.Sprintf("%s %s token %d (line %d)", h.client, h.mode, h.token, h.line))
			}
			c.failf("%s: by the audit log, held at the end by %v; it is held by %s alone", lock, got, want)
		}
	}
	c.t.Logf("audit log: %d lines, %d runs, %d grants replayed, %d lines cancelled as never committed", len(raw), starts, grants, cancelled)
}
