package validate

import (
	"cmp"
	"slices"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// TestWakeBites feeds checkWake hand-made histories of waiters answered
// 1.5 s after the operation that handed them the lock returned (a
// violation) and 0.5 s after (fine), for each way a lock is handed over:
// an exclusive holder's release, the last of several shared holders'
// releases, and the withdrawal of a waiter ahead.
func TestWakeBites(t *testing.T) {
	granted := func(token int64) history.Output { return history.Output{Outcome: lk.Granted, Token: token} }
	shared := func(in history.Input) history.Input { in.Mode = lk.Shared; return in }
	released, withdrawn := history.Output{Outcome: lk.Released}, history.Output{Outcome: lk.Withdrawn}
	for _, c := range []struct {
		name    string
		history func(b *hist, answer int64)
		handed  int64 // when the hand-over returned, in ms
	}{
		{"exclusive holder released", func(b *hist, answer int64) {
			b.op(0, 5, acq("a", 5), granted(1))
			b.op(100, answer, acq("b", 5), granted(2))
			b.op(1000, 1005, rel("a"), released)
		}, 1005},
		{"last of two shared holders released", func(b *hist, answer int64) {
			b.op(0, 5, shared(acq("s1", 5)), granted(1))
			b.op(10, 15, shared(acq("s2", 5)), granted(2))
			b.op(100, answer, acq("x", 5), granted(3))
			// The first release handed over nothing: s2 still held.
			b.op(1000, 1005, rel("s1"), released)
			b.op(2000, 2005, rel("s2"), released)
		}, 2005},
		{"the exclusive waiter ahead withdrew", func(b *hist, answer int64) {
			b.op(0, 5, shared(acq("s1", 5)), granted(1))
			b.op(50, 55, acq("y", 0), history.Output{Outcome: lk.Queued, Position: 1})
			b.op(100, answer, shared(acq("r", 5)), granted(2))
			b.op(2000, 2005, rel("y"), withdrawn)
		}, 2005},
	} {
		for _, late := range []bool{false, true} {
			answer := c.handed + 500
			if late {
				answer = c.handed + 1500
			}
			b := newHist()
			c.history(b, answer)
			ops := b.h.Ops()
			slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Return, b.Return) })
			var vs violations
			cov := checkWake(&vs, b.h, ops, nil)
			got := vs.result()
			switch {
			case cov.checked != 1:
				t.Errorf("%s, answered at %d ms: %d checked (%s), want 1", c.name, answer, cov.checked, cov)
			case late && (len(got) != 1 || got[0].Check != CheckWake):
				t.Errorf("%s, answered 1.5 s after the hand-over: got %v, want a wake-up violation", c.name, got)
			case !late && len(got) != 0:
				t.Errorf("%s, answered 0.5 s after the hand-over: got %v, want none", c.name, got)
			}
			if len(got) > 0 {
				t.Logf("%s: %v", c.name, got[0])
			}
		}
	}
}

// TestWakeLeavesOut: a hand-over the history does not show is not timed,
// but counted: the holder's release has an unknown outcome.
func TestWakeLeavesOut(t *testing.T) {
	b := newHist()
	b.op(0, 5, acq("a", 5), history.Output{Outcome: lk.Granted, Token: 1})
	b.op(100, 4000, acq("b", 5), history.Output{Outcome: lk.Granted, Token: 2})
	b.op(1000, 1005, rel("a"), history.Output{Unknown: true, Detail: "timeout"})
	var vs violations
	cov := checkWake(&vs, b.h, b.h.Ops(), nil)
	if got := vs.result(); len(got) != 0 || cov.checked != 0 || cov.skipped["holder's release unknown"] != 1 {
		t.Errorf("got %v, coverage %s; want nothing checked, one left out", got, cov)
	}
}
