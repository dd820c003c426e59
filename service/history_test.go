package service_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// historyBackends are the databases the history tests run on; read says
// whether the database has read connections (ReadHistory answers apart).
var historyBackends = []struct {
	name string
	path func(t *testing.T) string
	read bool
}{
	{"sqlite-memory", func(*testing.T) string { return repo.MemoryPath }, false},
	{"sqlite-file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "h.db") }, true},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }, true},
}

func openWithHistory(t *testing.T, path string, h service.HistoryRetention) *engine.Direct {
	t.Helper()
	svc, err := engine.OpenDirect(context.Background(), path, repo.Options{}, service.Config{History: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

// grantLine writes a grant as the tests compare it:
// lock/token client mode granted_at-expires_at ended@ended_at.
func grantLine(g lk.GrantRecord) string {
	end := "live"
	if g.Ended != nil || g.EndedAt != nil {
		end = "?@?"
		if g.Ended != nil && g.EndedAt != nil {
			end = fmt.Sprintf("%s@%d", *g.Ended, *g.EndedAt)
		}
	}
	return fmt.Sprintf("%s/%d %s %s %d-%d %s", g.Lock, g.Token, g.Client, g.Mode, g.GrantedAt, g.ExpiresAt, end)
}

func grantLines(gs []lk.GrantRecord) string {
	var b strings.Builder
	for _, g := range gs {
		b.WriteString(grantLine(g))
		b.WriteByte('\n')
	}
	return b.String()
}

type historyDriver struct {
	t   *testing.T
	svc *engine.Direct
}

func (d historyDriver) acquire(ts int64, client, lock string, ttl int64, mode lk.Mode) lk.AcquireResult {
	d.t.Helper()
	r, err := d.svc.Acquire(context.Background(), ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: ttl, Mode: mode})
	if err != nil {
		d.t.Fatalf("acquire %s %s at %d: %v", client, lock, ts, err)
	}
	return r
}

func (d historyDriver) ok(what string, _ any, err error) {
	d.t.Helper()
	if err != nil {
		d.t.Fatalf("%s: %v", what, err)
	}
}

// history reads the whole history of a lock or a client at ts, in pages of
// limit, and checks that the read apart (where there is one) agrees.
func (d historyDriver) history(ts int64, req lk.HistoryRequest, limit int, readApart bool) string {
	d.t.Helper()
	var apart func(lk.HistoryRequest, lk.HistoryResult)
	if readApart {
		apart = func(req lk.HistoryRequest, res lk.HistoryResult) {
			got, err := engine.Apart(d.svc, context.Background(), ts, req, service.History)
			if err != nil {
				d.t.Fatalf("read history apart %+v: %v", req, err)
			}
			if got, want := grantLines(got.Grants), grantLines(res.Grants); got != want {
				d.t.Errorf("history read apart:\n%swant, as in a transaction:\n%s", got, want)
			}
		}
	}
	return grantLines(testutil.HistoryPages(d.t, d.svc, ts, req, limit, apart))
}

// TestHistoryEndings: every way a lease ends gets its row, written in the
// operation that ended it; ended_at of a lapse is its expires_at (the
// hand-over instant), even when the lapse is noticed much later, and a
// waiter granted and lapsed within that one late operation has its row
// too; renewals keep expires_at current; a deadlock victim's leases end
// aborted (D4.3 releases them) and its successor's grant follows.
func TestHistoryEndings(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			d := historyDriver{t, openWithHistory(t, b.path(t), service.HistoryRetention{})}
			ctx := context.Background()
			d.acquire(0, "a", "L1", 10, lk.Exclusive)
			res, err := d.svc.Renew(ctx, 1, lk.RenewRequest{Client: "a", Lock: "L1", TTL: 20})
			d.ok("renew", res, err)
			d.acquire(2, "b", "L1", 5, lk.Exclusive) // queued
			d.acquire(3, "c", "L1", 5, lk.Exclusive) // queued
			// Noticed at 50: a lapsed at 21, b was granted then and lapsed at
			// 26, c at 26 and lapsed at 31.
			d.ok("advance", nil, d.svc.Advance(ctx, 50))

			d.acquire(60, "a", "L2", 100, lk.Shared)
			rel, err := d.svc.Release(ctx, 61, lk.ReleaseRequest{Client: "a", Lock: "L2"})
			d.ok("release", rel, err)
			d.acquire(62, "d", "L3", 100, lk.Exclusive)
			rev, err := engine.Do(d.svc, ctx, 63, lk.RevokeRequest{Client: "d", Lock: "L3"}, service.Revoke)
			d.ok("revoke", rev, err)

			// e holds X, f holds Y; e waits for Y; f asking for X closes the
			// cycle, and f, the younger, is the victim: its Y goes to e.
			d.acquire(70, "e", "X", 100, lk.Exclusive)
			d.acquire(70, "f", "Y", 100, lk.Exclusive)
			d.acquire(70, "e", "Y", 100, lk.Exclusive)
			if r := d.acquire(71, "f", "X", 100, lk.Exclusive); r.Outcome != lk.Deadlock {
				t.Fatalf("f's acquire closing the cycle = %+v, want deadlock", r)
			}

			ts := int64(80)
			want := map[string]string{
				"L1": "L1/3 c exclusive 26-31 lapsed@31\nL1/2 b exclusive 21-26 lapsed@26\nL1/1 a exclusive 0-21 lapsed@21\n",
				"L2": "L2/1 a shared 60-160 released@61\n",
				"L3": "L3/1 d exclusive 62-162 revoked@63\n",
				"X":  "X/1 e exclusive 70-170 live\n",
				"Y":  "Y/2 e exclusive 71-171 live\nY/1 f exclusive 70-170 aborted@71\n",
			}
			for lock, w := range want {
				if got := d.history(ts, lk.HistoryRequest{Lock: lock}, 2, b.read); got != w {
					t.Errorf("history of %s:\n%swant:\n%s", lock, got, w)
				}
			}
			if got, w := d.history(ts, lk.HistoryRequest{Client: "a"}, 1, b.read),
				"L2/1 a shared 60-160 released@61\nL1/1 a exclusive 0-21 lapsed@21\n"; got != w {
				t.Errorf("history of client a:\n%swant:\n%s", got, w)
			}
			if got, w := d.history(ts, lk.HistoryRequest{Client: "e"}, 1, b.read),
				"Y/2 e exclusive 71-171 live\nX/1 e exclusive 70-170 live\n"; got != w {
				t.Errorf("history of client e:\n%swant:\n%s", got, w)
			}
			if got := d.history(ts, lk.HistoryRequest{Lock: "never"}, 5, b.read); got != "" {
				t.Errorf("history of a lock never granted:\n%s", got)
			}
		})
	}
}

// TestHistoryReadApartWaitsForLapse: a read apart never shows a lease live
// after its expiry: it answers ErrNeedsTx until a transaction retires it.
func TestHistoryReadApartWaitsForLapse(t *testing.T) {
	d := historyDriver{t, openWithHistory(t, filepath.Join(t.TempDir(), "h.db"), service.HistoryRetention{})}
	d.acquire(0, "a", "L", 10, lk.Exclusive)
	_, err := engine.Apart(d.svc, context.Background(), 10, lk.HistoryRequest{Lock: "L", Limit: 10}, service.History)
	if !errors.Is(err, service.ErrNeedsTx) {
		t.Fatalf("read apart at the expiry = %v, want ErrNeedsTx", err)
	}
	if got, w := d.history(10, lk.HistoryRequest{Lock: "L"}, 10, true), "L/1 a exclusive 0-10 lapsed@10\n"; got != w {
		t.Errorf("history:\n%swant:\n%s", got, w)
	}
}

// TestHistoryKeep: a lock keeps the ended rows of its last Keep tokens, and
// the row of a live lease whatever its age; once that lease ends, the next
// grant prunes it. Grants on the spot and from the queue both prune.
func TestHistoryKeep(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			d := historyDriver{t, openWithHistory(t, b.path(t), service.HistoryRetention{Keep: 3})}
			ctx := context.Background()
			d.acquire(0, "old", "K", 1000, lk.Shared) // token 1, held throughout
			for i := int64(1); i <= 9; i++ {          // tokens 2..10
				d.acquire(i, "c", "K", 100, lk.Shared)
				_, err := d.svc.Release(ctx, i, lk.ReleaseRequest{Client: "c", Lock: "K"})
				d.ok("release", nil, err)
			}
			if got, w := d.history(20, lk.HistoryRequest{Lock: "K"}, 100, b.read),
				"K/10 c shared 9-109 released@9\nK/9 c shared 8-108 released@8\nK/8 c shared 7-107 released@7\nK/1 old shared 0-1000 live\n"; got != w {
				t.Errorf("history kept:\n%swant:\n%s", got, w)
			}
			_, err := d.svc.Release(ctx, 21, lk.ReleaseRequest{Client: "old", Lock: "K"})
			d.ok("release old", nil, err)
			// From the queue: x holds, y waits, x releases: y's grant
			// (token 12) prunes up to token 9.
			d.acquire(22, "x", "K", 100, lk.Exclusive)
			d.acquire(22, "y", "K", 100, lk.Exclusive)
			_, err = d.svc.Release(ctx, 23, lk.ReleaseRequest{Client: "x", Lock: "K"})
			d.ok("release x", nil, err)
			if got, w := d.history(30, lk.HistoryRequest{Lock: "K"}, 100, b.read),
				"K/12 y exclusive 23-123 live\nK/11 x exclusive 22-122 released@23\nK/10 c shared 9-109 released@9\n"; got != w {
				t.Errorf("history after the old lease ended:\n%swant:\n%s", got, w)
			}
		})
	}
}

// TestHistoryKeepInSteps: past its keep tokens a lock's rows go a step at
// a time (a sixteenth of keep, at most 64 tokens): with keep 64 the bound
// moves by 4, at the grants of tokens 68, 72, ..., so that between steps
// the lock keeps up to keep+3 ended tokens, and a grant there deletes
// nothing. Grants on the spot and from the queue both prune.
func TestHistoryKeepInSteps(t *testing.T) {
	const keep = 64
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			d := historyDriver{t, openWithHistory(t, b.path(t), service.HistoryRetention{Keep: keep})}
			ctx := context.Background()
			// oldest returns the lowest ended token S keeps, and how many.
			oldest := func(ts int64) (low, n int64) {
				for _, line := range strings.Split(strings.TrimSpace(d.history(ts, lk.HistoryRequest{Lock: "S"}, 1000, false)), "\n") {
					var tok int64
					if _, err := fmt.Sscanf(line, "S/%d", &tok); err != nil {
						t.Fatalf("history line %q: %v", line, err)
					}
					if !strings.HasSuffix(line, " live") {
						if low == 0 || tok < low {
							low = tok
						}
						n++
					}
				}
				return low, n
			}
			check := func(ts, token int64) {
				t.Helper()
				through := int64(0) // historyPruneBound(token, keep)
				if token > keep {
					through = (token - keep) / 4 * 4
				}
				if low, n := oldest(ts); n != token-1-through || n > 0 && low != through+1 {
					t.Fatalf("after the grant of token %d: oldest ended token %d, %d ended kept; want %d and %d",
						token, low, n, through+1, token-1-through)
				}
			}
			ts := int64(1)
			for token := int64(1); token <= 80; token++ { // on the spot
				if r := d.acquire(ts, "a", "S", 100, lk.Exclusive); r.Token != token {
					t.Fatalf("acquire at %d: %+v, want token %d", ts, r, token)
				}
				check(ts, token)
				_, err := d.svc.Release(ctx, ts, lk.ReleaseRequest{Client: "a", Lock: "S"})
				d.ok("release", nil, err)
				ts++
			}
			holder, waiter := "a", "b"
			d.acquire(ts, holder, "S", 100, lk.Exclusive)   // token 81
			for token := int64(82); token <= 100; token++ { // from the queue
				d.acquire(ts, waiter, "S", 100, lk.Exclusive)
				_, err := d.svc.Release(ctx, ts, lk.ReleaseRequest{Client: holder, Lock: "S"})
				d.ok("release", nil, err)
				check(ts, token)
				holder, waiter = waiter, holder
				ts++
			}
		})
	}
}

// TestPredecessorsKeptBetweenSteps: a grant between two steps of the
// pruning deletes nothing new, so its predecessors include an old token
// that the step has not reached yet, and a grant at a step deletes the
// rows up to it, predecessors too. With keep 32 (a step of 2): token 35
// prunes up to token 2, not 3, so a reader that held token 3 while tokens
// 4 to 34 came and went, and ended after 34, is a predecessor of 35; token
// 36 prunes up to 4, so a reader of token 4 that ended after 35 is not
// one of 36's. An exclusive grant on the spot names them from the read of
// its request (NextPredecessors), which must prune as the grant does.
func TestPredecessorsKeptBetweenSteps(t *testing.T) {
	for _, b := range historyBackends {
		for _, c := range []struct {
			held  int64  // the reader's token
			token int64  // the exclusive grant's
			want  string // its predecessors
		}{
			{3, 35, "[y/34 released r/3 released]"},
			{4, 36, "[y/35 released]"},
		} {
			t.Run(fmt.Sprintf("%s/%d", b.name, c.token), func(t *testing.T) {
				svc, err := engine.OpenDirect(context.Background(), b.path(t), repo.Options{},
					service.Config{Explain: true, History: service.HistoryRetention{Keep: 32}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { svc.Close() })
				d := historyDriver{t, svc}
				ctx := context.Background()
				release := func(ts int64, client string) {
					t.Helper()
					_, err := d.svc.Release(ctx, ts, lk.ReleaseRequest{Client: client, Lock: "P"})
					d.ok("release "+client, nil, err)
				}
				ts := int64(1)
				for ; ts < c.held; ts++ {
					d.acquire(ts, "x", "P", 100, lk.Exclusive)
					release(ts, "x")
				}
				d.acquire(ts, "r", "P", 1000, lk.Shared) // held
				for ts++; ts < c.token; ts++ {
					d.acquire(ts, "y", "P", 100, lk.Shared) // joining r
					release(ts, "y")
				}
				release(ts, "r")
				r := d.acquire(ts+1, "z", "P", 100, lk.Exclusive)
				var got []string
				for _, p := range r.Predecessors {
					got = append(got, fmt.Sprintf("%s/%d %s", *p.Client, p.Token, p.Ended))
				}
				if r.Token != c.token || fmt.Sprint(got) != c.want {
					t.Fatalf("z: token %d, predecessors %v; want %d and %s", r.Token, got, c.token, c.want)
				}
			})
		}
	}
}

// TestHistoryDays: rows that ended more than Days ago go, in batches, as
// operations move the clock; a live lease's row stays.
func TestHistoryDays(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			d := historyDriver{t, openWithHistory(t, b.path(t), service.HistoryRetention{Days: 1})}
			ctx := context.Background()
			const n = 600 // more than one batch
			for i := int64(0); i < n; i++ {
				lock := fmt.Sprintf("L%03d", i)
				d.acquire(0, "c", lock, 10, lk.Exclusive)
				_, err := d.svc.Release(ctx, 0, lk.ReleaseRequest{Client: "c", Lock: lock})
				d.ok("release", nil, err)
			}
			d.acquire(0, "live", "Z", lk.MaxTTL, lk.Exclusive)
			for ts := int64(1); ts < 86400; ts += 50000 {
				_, err := d.svc.Renew(ctx, ts, lk.RenewRequest{Client: "live", Lock: "Z", TTL: lk.MaxTTL})
				d.ok("renew", nil, err)
				res, err := engine.Do(d.svc, ctx, ts, lk.HistoryRequest{Lock: "L000", Limit: 1}, service.History)
				d.ok("history", nil, err)
				if len(res.Grants) != 1 {
					t.Fatalf("at %d, less than a day after it ended, the row of L000 is gone", ts)
				}
			}
			for _, ts := range []int64{86401, 86402, 86403, 86404} {
				_, err := d.svc.Renew(ctx, ts, lk.RenewRequest{Client: "live", Lock: "Z", TTL: lk.MaxTTL})
				d.ok("renew", nil, err)
			}
			for i := 0; i < n; i += 97 {
				lock := fmt.Sprintf("L%03d", i)
				if got := d.history(86404, lk.HistoryRequest{Lock: lock}, 10, b.read); got != "" {
					t.Errorf("a day and more after it ended, %s still has\n%s", lock, got)
				}
			}
			if got, w := d.history(86404, lk.HistoryRequest{Lock: "Z"}, 10, b.read),
				"Z/1 live exclusive 0-172804 live\n"; got != w {
				t.Errorf("live lease's history:\n%swant:\n%s", got, w)
			}
		})
	}
}

// TestHistoryRequestValidate: exactly one of lock and client; a before
// that is no cursor of its kind is refused.
func TestHistoryRequestValidate(t *testing.T) {
	bad := []lk.HistoryRequest{
		{Limit: 10},
		{Lock: "L", Client: "c", Limit: 10},
		{Lock: "L", Limit: 0},
		{Lock: "L", Limit: lk.MaxLocksLimit + 1},
		{Lock: "L", Limit: 10, Before: "x"},
		{Lock: "L", Limit: 10, Before: "0"},
		{Client: "c", Limit: 10, Before: "5"},
		{Client: "c", Limit: 10, Before: "5,x,L"},
	}
	for _, r := range bad {
		if err := r.Validate(); !errors.Is(err, lk.ErrInvalidArguments) {
			t.Errorf("%+v: Validate = %v, want invalid arguments", r, err)
		}
	}
	good := []lk.HistoryRequest{
		{Lock: "L", Limit: 1},
		{Lock: "L", Limit: 10, Before: "7"},
		{Client: "c", Limit: 10, Before: lk.ClientCursor{GrantedAt: -5, Token: 3, Lock: "a,b"}.String()},
	}
	for _, r := range good {
		if err := r.Validate(); err != nil {
			t.Errorf("%+v: Validate = %v", r, err)
		}
	}
	c := lk.ClientCursor{GrantedAt: -5, Token: 3, Lock: "a,b"}
	if got, ok := lk.ParseClientCursor(c.String()); !ok || got != c {
		t.Errorf("cursor %+v came back as %+v, %v", c, got, ok)
	}
}

// TestHistoryPruneCostIndependentOfLiveHolders: the pruning that each
// grant does reads the ended rows it deletes, never the rows of the lock's
// live leases, which stay: a grant on a lock with 5,000 live shared holders
// reads the pages one with 200 does, give or take a B-tree level.
func TestHistoryPruneCostIndependentOfLiveHolders(t *testing.T) {
	cost := func(n int) int64 {
		svc := openWithHistory(t, repo.MemoryPath, service.HistoryRetention{Keep: 4})
		d := historyDriver{t, svc}
		ctx := context.Background()
		for i := 0; i < n; i++ {
			d.acquire(0, fmt.Sprintf("h%05d", i), "S", lk.MaxTTL, lk.Shared)
		}
		var pages int64
		for i := 0; i < 10; i++ {
			before, err := svc.PagesRead()
			d.ok("pages", nil, err)
			d.acquire(1, "x", "S", 100, lk.Shared)
			after, err := svc.PagesRead()
			d.ok("pages", nil, err)
			pages = after - before
			_, err = svc.Release(ctx, 1, lk.ReleaseRequest{Client: "x", Lock: "S"})
			d.ok("release", nil, err)
		}
		return pages
	}
	small, large := cost(200), cost(5000)
	t.Logf("a grant read %d pages beside 200 live holders, %d beside 5,000", small, large)
	if large > small+8 {
		t.Errorf("a grant read %d pages beside 5,000 live holders, %d beside 200: its pruning reads the live rows", large, small)
	}
}
