package validate

import (
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// hist builds a history from operations given with their times in
// milliseconds.
type hist struct {
	h *history.History
}

func newHist() *hist { return &hist{h: history.New()} }

func (b *hist) op(call, ret int64, in history.Input, out history.Output) {
	b.h.Record(history.Op{Input: in, Output: out, Call: call * 1e6, Return: ret * 1e6})
}

func (b *hist) fault(at int64, kind string) {
	b.h.RecordFault(history.Fault{At: at * 1e6, Kind: kind})
}

// kill notes the kill of the process the operations went to (server 0,
// incarnation 0), whose effects had all appeared by settled.
func (b *hist) kill(at, settled int64) {
	b.h.RecordFault(history.Fault{At: at * 1e6, Kind: "kill", Settled: settled * 1e6})
}

func acq(client string, wait int64) history.Input {
	return history.Input{Kind: history.Acquire, Client: client, Lock: "L", TTL: 300, Mode: lk.Exclusive, Wait: wait}
}
func rel(client string) history.Input {
	return history.Input{Kind: history.Release, Client: client, Lock: "L"}
}
func wr(client, key, value string, token int64) history.Input {
	return history.Input{Kind: history.Write, Client: client, Lock: "L", Key: key, Value: value, Token: token}
}
func rd(key string, final bool) history.Input {
	return history.Input{Kind: history.Read, Client: "r", Lock: "L", Key: key, Final: final}
}
func grant(token int64) history.Output {
	now := time.Now().Unix()
	return history.Output{Outcome: lk.Granted, Token: token, GrantedAt: now, ExpiresAt: now + 300}
}
func said(o lk.Outcome) history.Output { return history.Output{Outcome: o} }

// grantAt is grant(token) at the server's second at, for a 300 s lease.
func grantAt(token, at int64) history.Output {
	return history.Output{Outcome: lk.Granted, Token: token, GrantedAt: at, ExpiresAt: at + 300}
}
func value(v string, token int64) history.Output {
	return history.Output{Value: &v, Token: token}
}

var unknown = history.Output{Unknown: true, Detail: "connection reset"}

// verdict runs the invariant checks and porcupine on b's history.
func verdict(t *testing.T, b *hist) ([]string, porcupine.CheckResult) {
	t.Helper()
	var checks []string
	for _, v := range checkInvariants(b.h) {
		if !slices.Contains(checks, v.Check) {
			checks = append(checks, v.Check)
		}
	}
	res, _ := checkLinearizable(b.h, 10*time.Second)
	return checks, res
}

// TestChecksBite: hand-made histories of what a broken server would
// answer are reported by the checks meant for them, and the same
// histories done right, unknown outcomes included, pass.
func TestChecksBite(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *hist)
		checks []string // what the invariant checks report
		linear porcupine.CheckResult
	}{
		{"a hand-over", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 90, acq("b", 5), grant(2)) // blocked until a's release
			b.op(30, 40, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(50, 60, rel("a"), said(lk.Released))
			b.op(100, 110, wr("b", "k", "b1", 2), said(lk.OK))
			b.op(120, 130, wr("a", "k", "late", 1), history.Output{Err: lk.CodeStaleToken})
			b.op(140, 150, rd("k", true), value("b1", 2))
		}, nil, porcupine.Ok},
		{"unknown outcomes that happened, and one that did not", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 25, wr("a", "k", "a1", 1), unknown)
			b.fault(26, "kill")
			b.op(30, 35, rel("a"), unknown) // did not happen: a still holds
			b.op(40, 50, rel("a"), said(lk.Released))
			b.op(60, 70, acq("b", 0), unknown) // happened: b holds 2
			b.op(80, 90, acq("c", 0), history.Output{Outcome: lk.Queued, Position: 1})
			b.op(91, 95, acq("c", 0), history.Output{Err: lk.CodeClientBusy})
			b.op(100, 110, rel("b"), said(lk.Released)) // hands over to c: 3
			b.op(120, 130, rel("c"), said(lk.Released))
			b.op(140, 150, rd("k", true), value("a1", 1))
		}, nil, porcupine.Ok},
		{"an unknown release to a killed server that never happened", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 25, rel("a"), unknown)
			b.kill(26, 30)
			b.op(40, 50, acq("b", 0), history.Output{Outcome: lk.Queued, Position: 1})
		}, nil, porcupine.Ok},
		{"an unknown write to a killed server seen after it settled", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), unknown)
			b.kill(26, 30)
			b.op(40, 50, rd("k", false), history.Output{})
			b.op(60, 70, rd("k", true), value("a1", 1))
		}, nil, porcupine.Illegal},
		{"a lease ended by its holder's stale release", func(b *hist) {
			// a's cleanup release, stuck in a paused server, ends the lease
			// a took meanwhile; b is granted long before its expiry.
			b.op(0, 10, acq("a", 0), grantAt(1, 10))
			b.op(20, 30, rel("a"), said(lk.Released))
			b.fault(35, "pause")
			b.op(40, 45, rel("a"), unknown)
			b.op(50, 60, acq("a", 5), grantAt(2, 20))
			b.op(70, 80, rel("a"), history.Output{Err: lk.CodeNotHolder})
			b.op(90, 100, acq("b", 0), grantAt(3, 21))
		}, nil, porcupine.Ok},
		{"a lease handed over before it lapsed", func(b *hist) {
			// The same, but the release went to a killed server, whose
			// effects had all appeared before a's acquire.
			b.op(0, 10, acq("a", 0), grantAt(1, 10))
			b.op(20, 30, rel("a"), said(lk.Released))
			b.op(40, 45, rel("a"), unknown)
			b.kill(46, 48)
			b.op(50, 60, acq("a", 5), grantAt(2, 20))
			b.op(70, 80, rel("a"), history.Output{Err: lk.CodeNotHolder})
			b.op(90, 100, acq("b", 0), grantAt(3, 21))
		}, []string{CheckLapse}, porcupine.Illegal},
		{"two exclusive holders", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 30, acq("b", 0), grant(2))
			b.op(40, 50, rel("a"), said(lk.Released))
			b.op(60, 70, rel("b"), said(lk.Released))
		}, []string{CheckExclusive}, porcupine.Illegal},
		{"a token reissued after a crash", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 30, rel("a"), said(lk.Released))
			b.fault(35, "kill")
			b.op(40, 50, acq("b", 0), grant(1))
		}, []string{CheckTokenUnique, CheckTokenCrash}, porcupine.Illegal},
		{"a blocked grant with a token skipped", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 90, acq("b", 5), grant(3))
			b.op(50, 60, rel("a"), said(lk.Released))
			b.op(100, 110, rel("b"), said(lk.Released))
		}, nil, porcupine.Illegal},
		{"a stale write accepted", func(b *hist) {
			b.op(0, 10, wr("b", "k", "b1", 2), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a1", 1), said(lk.OK))
		}, []string{CheckFencing}, porcupine.Illegal},
		{"a write refused with no higher token", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), history.Output{Err: lk.CodeStaleToken})
		}, []string{CheckFalseStale}, porcupine.Illegal},
		{"an acknowledged write lost", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), said(lk.OK))
			b.fault(35, "kill")
			b.op(40, 50, rd("k", true), value("a1", 1))
		}, []string{CheckLostWrite}, porcupine.Illegal},
		{"a value nobody wrote", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(40, 50, rd("k", true), value("zz", 1))
		}, []string{CheckPhantomValue}, porcupine.Illegal},
		{"a read from the past, not final", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), said(lk.OK))
			b.op(40, 50, rd("k", false), value("a1", 1))
		}, nil, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newHist()
			c.build(b)
			checks, res := verdict(t, b)
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

// TestUndecided: a run is undecided when porcupine's search ran out of
// time and no other check found anything; a linearization ruled out, or
// any other finding, decides it.
func TestUndecided(t *testing.T) {
	search := Violation{Check: CheckLinearization, Message: "the search did not end"}
	other := Violation{Check: CheckTokenUnique, Message: "a token reissued"}
	for _, c := range []struct {
		r    Result
		want bool
	}{
		{Result{Linearizable: porcupine.Unknown, Violations: []Violation{search}}, true},
		{Result{Linearizable: porcupine.Unknown, Violations: []Violation{search, other}}, false},
		{Result{Linearizable: porcupine.Illegal, Violations: []Violation{search}}, false},
		{Result{Linearizable: porcupine.Ok}, false},
		{Result{Linearizable: porcupine.Ok, Violations: []Violation{other}}, false},
	} {
		if got := c.r.Undecided(); got != c.want {
			t.Errorf("%v: Undecided() = %v, want %v", c.r, got, c.want)
		}
	}
}
