package validate

import (
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// unavailable is the answer a server owes its client while the database is
// away: 503 {"error": "unavailable"} with Retry-After: 1.
var unavailable = history.Output{Unknown: true, Detail: "unavailable", Status: 503, Code: lk.CodeUnavailable, RetryAfter: 1}

// outage notes the primary's crash at crash and the promotion at promote
// (milliseconds), settled a second later.
func (b *hist) outage(crash, promote int64) {
	b.h.RecordFault(history.Fault{At: crash * 1e6, Kind: history.FaultPrimaryCrash, Server: -1})
	b.h.RecordFault(history.Fault{At: promote * 1e6, Kind: history.FaultPromote, Server: -1, Settled: (promote + 1000) * 1e6})
}

// TestAnswerChecksBite: the checks on answers and on the service's time,
// on hand-made histories of servers that break their promises, and on the
// same done right.
func TestAnswerChecksBite(t *testing.T) {
	at := func(grantedAt, ttl int64, o lk.Outcome, token int64) history.Output {
		return history.Output{Outcome: o, Token: token, GrantedAt: grantedAt, ExpiresAt: grantedAt + ttl}
	}
	cases := []struct {
		name   string
		build  func(b *hist)
		checks []string
		linear porcupine.CheckResult
	}{
		{"503 unavailable during a failover, and a cut-off write that did commit", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.outage(20, 2000)
			b.op(30, 40, wr("a", "k", "a1", 1), unavailable)
			b.op(2500, 2600, rel("a"), unavailable) // within RecoverBy of the promotion
			b.op(2700, 2800, rel("a"), said(lk.Released))
			b.op(4000, 4100, rd("k", true), value("a1", 1))
		}, nil, porcupine.Ok},
		{"a write cut off by the failover seen only after a read missed it", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.outage(20, 2000)
			b.op(30, 40, wr("a", "k", "a1", 1), unavailable)
			b.op(3100, 3200, rd("k", false), history.Output{})
			b.op(4000, 4100, rd("k", true), value("a1", 1))
		}, nil, porcupine.Illegal},
		{"a committed write answered 503 with its outcome unknown (commit-then-fail)", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.h.RecordFault(history.Fault{At: 20 * 1e6, Kind: history.FaultCommitThenFail})
			b.op(30, 40, wr("a", "k", "a1", 1), unavailable)
			b.op(4000, 4100, rd("k", true), value("a1", 1))
		}, nil, porcupine.Ok},
		{"a committed write answered 503 \"applied\": false, trusted", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.h.RecordFault(history.Fault{At: 20 * 1e6, Kind: history.FaultCommitThenFail})
			b.op(30, 40, wr("a", "k", "a1", 1), history.Output{NotApplied: true, Detail: "unavailable", Status: 503, Code: lk.CodeUnavailable, RetryAfter: 1})
			b.op(4000, 4100, rd("k", true), value("a1", 1))
		}, []string{CheckPhantomValue}, porcupine.Illegal},
		{"500 during a failover", func(b *hist) {
			b.outage(20, 2000)
			b.op(30, 40, rel("a"), history.Output{Unknown: true, Status: 500, Code: "internal"})
		}, []string{CheckUnavailable}, porcupine.Ok},
		{"503 without Retry-After: 1", func(b *hist) {
			b.outage(20, 2000)
			b.op(30, 40, rel("a"), history.Output{Unknown: true, Status: 503, Code: lk.CodeUnavailable})
		}, []string{CheckUnavailable}, porcupine.Ok},
		{"503 with no database fault", func(b *hist) {
			b.op(30, 40, rel("a"), unavailable)
		}, []string{CheckRecovery}, porcupine.Ok},
		{"503 still, long after the promotion", func(b *hist) {
			b.outage(20, 2000)
			b.op(2000+5100, 2000+5200, rel("a"), unavailable)
		}, []string{CheckRecovery}, porcupine.Ok},
		{"503 before the primary went", func(b *hist) {
			b.op(0, 10, rel("a"), unavailable)
			b.outage(20, 2000)
		}, []string{CheckRecovery}, porcupine.Ok},
		{"no answer from a server that was up", func(b *hist) {
			b.op(0, 10000, rel("a"), history.Output{Unknown: true, Detail: "context deadline exceeded"})
		}, []string{CheckNoAnswer}, porcupine.Ok},
		{"no answer from a server paused before", func(b *hist) {
			b.h.RecordFault(history.Fault{At: 0, Kind: "pause"})
			b.op(10, 10000, rel("a"), history.Output{Unknown: true, Detail: "context deadline exceeded"})
		}, nil, porcupine.Ok},
		{"time runs backwards across servers", func(b *hist) {
			b.op(0, 10, acq("a", 0), at(1000, 300, lk.Granted, 1))
			b.op(20, 30, history.Input{Kind: history.Renew, Client: "a", Lock: "L", TTL: 300}, at(999, 300, lk.Renewed, 1))
		}, []string{CheckTimeOrder}, porcupine.Ok},
		{"two waiters granted in the order they joined the queue, not the order sent", func(b *hist) {
			// The model's cut of queue orders (Acquire's granted case)
			// must leave a linearization of this one.
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 100, acq("b", 5), grant(3))
			b.op(25, 90, acq("c", 5), grant(2))
			b.op(50, 60, rel("a"), said(lk.Released))
			b.op(92, 95, rel("c"), said(lk.Released))
		}, nil, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newHist()
			c.build(b)
			checks, res := verdict(t, b)
			// The other checks (tokens, fencing) see nothing wrong in
			// these; only the ones named may report.
			checks = slices.DeleteFunc(checks, func(c string) bool { return c == CheckLinearization })
			slices.Sort(checks)
			want := slices.Clone(c.checks)
			slices.Sort(want)
			if !slices.Equal(checks, want) {
				t.Errorf("invariant checks reported %v, want %v", checks, want)
			}
			if res != c.linear {
				t.Errorf("porcupine: %s, want %s", res, c.linear)
			}
		})
	}
}
