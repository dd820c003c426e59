package validate

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
)

// The checks of the crash scenario (check_audit.go, check_after.go,
// check_lease.go) bite: each is fed the fault it guards against, planted in
// a history, an audit log or a server's state, and reports it; the same
// done right passes.

// checksOf lists the checks vs names, sorted, once each.
func checksOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Check) {
			out = append(out, v.Check)
		}
	}
	slices.Sort(out)
	return out
}

func TestAuditChecksBite(t *testing.T) {
	now := time.Now().Unix()
	granted := func(token int64) history.Output {
		return history.Output{Outcome: lk.Granted, Token: token, GrantedAt: now, ExpiresAt: now + 300}
	}
	// The history: a holds L and writes, is killed, releases; c queues
	// and withdraws; a's late write is refused; b is granted after the
	// restart and holds L at the end.
	history := func(starts int) *history.History {
		b := newHist()
		for range starts {
			b.h.RecordFault(history.Fault{Kind: "start"})
		}
		b.op(0, 10, acq("a", 0), granted(1))
		b.op(20, 30, wr("a", "k", "a1", 1), said(lk.OK))
		b.op(40, 50, acq("c", 0), history.Output{Outcome: lk.Queued, Position: 1})
		b.op(60, 70, rel("c"), said(lk.Withdrawn))
		b.op(80, 90, rel("a"), said(lk.Released))
		b.op(100, 110, acq("b", 0), granted(2))
		b.op(120, 130, wr("b", "k", "b1", 2), said(lk.OK))
		b.op(140, 150, wr("a", "k", "late", 1), history.Output{Err: lk.CodeStaleToken})
		return b.h
	}
	grantLine := func(client string, token, expires, group int64) string {
		return fmt.Sprintf(`{"msg":"grant","lock":"L","client":%q,"mode":"exclusive","token":%d,"at":%d,"expires_at":%d,"source":"immediate","group":%d}`,
			client, token, now, expires, group)
	}
	// The log of that run: x's grant (group 4) was written when a kill
	// struck before its COMMIT, which the restart cancels; the kill also
	// cut a line short.
	good := []string{
		`{"msg":"start","pid":1}`,
		grantLine("a", 1, now+300, 1),
		fmt.Sprintf(`{"msg":"withdraw","lock":"L","client":"c","mode":"exclusive","position":1,"at":%d,"group":2}`, now),
		fmt.Sprintf(`{"msg":"release","lock":"L","client":"a","mode":"exclusive","token":1,"at":%d,"group":3}`, now),
		grantLine("x", 2, now+300, 4),
		`{"msg":"grant","lock":"L","cli`,
		`{"msg":"start","pid":2}`,
		`{"msg":"not_committed","group":4}`,
		grantLine("b", 2, now+300, 1),
		fmt.Sprintf(`{"msg":"stale_write","lock":"L","token":1,"highest":2,"at":%d,"group":2}`, now),
	}
	without := func(prefix string) func([]string) []string {
		return func(ls []string) []string {
			return slices.DeleteFunc(ls, func(l string) bool { return strings.HasPrefix(l, prefix) })
		}
	}
	cases := []struct {
		name   string
		starts int
		edit   func([]string) []string
		want   []string
	}{
		{"the log of the run", 2, nil, nil},
		{"a never-committed group not cancelled", 2, without(`{"msg":"not_committed"`),
			[]string{CheckAuditEnd, CheckAuditReplay}},
		{"a release missing", 2, without(`{"msg":"release"`),
			[]string{CheckAuditAcked, CheckAuditEnd, CheckAuditReplay}},
		{"a grant missing", 2, func(ls []string) []string {
			return slices.DeleteFunc(ls, func(l string) bool { return l == grantLine("b", 2, now+300, 1) })
		}, []string{CheckAuditAcked, CheckAuditEnd}},
		{"a grant logged with another expiry", 2, func(ls []string) []string {
			i := slices.Index(ls, grantLine("a", 1, now+300, 1))
			ls[i] = grantLine("a", 1, now+30, 1)
			return ls
		}, []string{CheckAuditAcked}},
		{"a token skipped", 2, func(ls []string) []string {
			i := slices.Index(ls, grantLine("b", 2, now+300, 1))
			ls[i] = grantLine("b", 3, now+300, 1)
			return ls
		}, []string{CheckAuditAcked, CheckAuditEnd, CheckAuditReplay}},
		{"a withdrawal and a stale write missing", 2, func(ls []string) []string {
			return without(`{"msg":"stale_write"`)(without(`{"msg":"withdraw"`)(ls))
		}, []string{CheckAuditAcked}},
		{"a line cut short, not by a kill", 2, func(ls []string) []string {
			return slices.Insert(ls, 2, `{"msg":"lapse","lo`)
		}, []string{CheckAuditReplay}},
		{"a start missing", 3, nil, []string{CheckAuditReplay}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := slices.Clone(good)
			if c.edit != nil {
				lines = c.edit(lines)
			}
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			vs := CheckAudit(history(c.starts), []string{path})
			if got := checksOf(vs); !slices.Equal(got, c.want) {
				t.Errorf("reported %v, want %v:\n%v", got, c.want, vs)
			}
		})
	}
}

func TestLeaseLengthBites(t *testing.T) {
	now := time.Now().Unix()
	for _, c := range []struct {
		name    string
		expires int64
		want    []string
	}{
		{"expires_at = granted_at + ttl", now + 300, nil},
		{"a lease a second short", now + 299, []string{CheckLeaseLength}},
	} {
		b := newHist()
		b.op(0, 10, acq("a", 5), history.Output{Outcome: lk.Granted, Token: 1, GrantedAt: now, ExpiresAt: c.expires})
		if got := checksOf(checkInvariants(b.h)); !slices.Equal(got, c.want) {
			t.Errorf("%s: reported %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCheckAfterBites runs CheckAfter on a live server against its true
// history, which must pass, and against histories with a fault planted:
// what a server that lost a grant, undid a release, or lost its fence
// would show.
func TestCheckAfterBites(t *testing.T) {
	h := history.New()
	c := cluster.Start(t, cluster.Options{History: h})
	ctx := context.Background()
	cl := traffic.NewClient(h, 0, c.Target(0), traffic.HTTPClient())
	lock := func(i int) string { return fmt.Sprintf("after-test/%d", i) }
	// Lock 0: a holds it, having written. Lock 1: b took it and released
	// it. Lock 2: c holds it.
	a := cl.Acquire(ctx, "a", lock(0), 300, lk.Exclusive, 0)
	cl.Write(ctx, "a", lock(0), "k", "a1", a.Output.Token)
	b := cl.Acquire(ctx, "b", lock(1), 300, lk.Exclusive, 0)
	cl.Release(ctx, "b", lock(1))
	cl.Acquire(ctx, "c", lock(2), 300, lk.Shared, 0)
	if !granted(a) || !granted(b) {
		t.Fatalf("the setup was not granted: %v, %v", a, b)
	}
	planted := func(ops ...history.Op) *history.History {
		// On h's clock, after its operations.
		d := history.New()
		for _, op := range h.Ops() {
			d.Record(op)
		}
		for _, op := range ops {
			op.Call, op.Return = h.Now(), h.Now()
			d.Record(op)
		}
		return d
	}
	now := time.Now().Unix()
	ghost := history.Op{Input: history.Input{Kind: history.Acquire, Client: "ghost", Lock: lock(3), TTL: 300, Mode: lk.Exclusive},
		Output: history.Output{Outcome: lk.Granted, Token: 7, GrantedAt: now, ExpiresAt: now + 300}}
	undone := history.Op{Input: history.Input{Kind: history.Release, Client: "c", Lock: lock(2)}, Output: history.Output{Outcome: lk.Released}}
	fence := history.Op{Input: history.Input{Kind: history.Write, Client: "a", Lock: lock(4), Key: "k", Value: "high", Token: 1000}, Output: history.Output{Outcome: lk.OK}}
	cases := []struct {
		name  string
		h     *history.History
		locks []int
		want  []string
	}{
		// First, the true history, before the state is changed by the cases below.
		{"the true history", planted(), []int{0, 1}, nil},
		{"an acknowledged grant lost", planted(ghost), []int{3}, []string{CheckAfterGrant, CheckAfterHolders}},
		{"an acknowledged release undone", planted(undone), []int{2}, []string{CheckAfterHolders}},
		{"the fence lost", planted(fence), []int{4}, []string{CheckAfterGrant}},
	}
	for _, tc := range cases {
		var locks []string
		for _, i := range tc.locks {
			locks = append(locks, lock(i))
		}
		vs := CheckAfter(ctx, tc.h, c.Target(0), locks)
		if got := checksOf(vs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: reported %v, want %v:\n%v", tc.name, got, tc.want, vs)
		}
	}
}

func TestPollChecksBite(t *testing.T) {
	now := time.Now().Unix()
	b := newHist()
	b.op(0, 10, acq("a", 0), history.Output{Outcome: lk.Granted, Token: 1, GrantedAt: now, ExpiresAt: now + 300})
	b.op(50, 60, rel("a"), said(lk.Released))
	b.op(70, 80, acq("b", 0), history.Output{Outcome: lk.Granted, Token: 2, GrantedAt: now, ExpiresAt: now + 300})
	holder := func(client string, token int64) lk.Holder {
		return lk.Holder{Client: client, Mode: lk.Exclusive, Token: token, ExpiresAt: now + 300}
	}
	poll := func(call, ret int64, hs ...lk.Holder) HolderPoll {
		return HolderPoll{Lock: "L", Call: call * 1e6, Return: ret * 1e6, Holders: hs}
	}
	for _, c := range []struct {
		name  string
		polls []HolderPoll
		want  []string
	}{
		{"the true holders", []HolderPoll{poll(20, 30, holder("a", 1)), poll(62, 65), poll(90, 100, holder("b", 2))}, nil},
		{"an exclusive holder beside another", []HolderPoll{poll(20, 30, holder("a", 1), holder("b", 2))}, []string{CheckPolledHolders}},
		{"a lease shown after its release", []HolderPoll{poll(62, 65, holder("a", 1))}, []string{CheckPolledHolders}},
		{"an acknowledged lease not shown", []HolderPoll{poll(20, 30)}, []string{CheckPolledHolders}},
		{"a token shown with another client", []HolderPoll{poll(90, 100, holder("c", 2))}, []string{CheckPolledHolders}},
	} {
		if got := checksOf(CheckPolls(b.h, c.polls)); !slices.Equal(got, c.want) {
			t.Errorf("%s: reported %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAPICheckerBites: an answer the document allows passes the
// APIChecker's client; one it does not (a grant without its token) is
// reported.
func TestAPICheckerBites(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"a grant as documented", `{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`, nil},
		{"a grant without its token", `{"outcome":"granted","granted_at":1767225600,"expires_at":1767225630}`, []string{CheckAPISchema}},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, c.body)
		}))
		a := NewAPIChecker(t)
		h := history.New()
		cl := traffic.NewClient(h, 0, func() cluster.Endpoint { return cluster.Endpoint{URL: srv.URL} }, a.Client())
		cl.Acquire(context.Background(), "a", "L", 300, lk.Exclusive, 0)
		srv.Close()
		vs, n := a.Violations()
		if got := checksOf(vs); n != 1 || !slices.Equal(got, c.want) {
			t.Errorf("%s: %d answers checked, reported %v, want 1 and %v", c.name, n, got, c.want)
		}
	}
}
