package service_test

import (
	"context"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestPredecessorsWithinASecond: seconds cannot order the ends and grants
// of one second; a grant's predecessors follow the order of operations.
// Readers granted together from the queue name the same leases; ends in
// the same second as the previous grant count; so does every reader that
// a deadlock abort ended in the requester's second.
func TestPredecessorsWithinASecond(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			d := explainOn(t, b.path(t))
			want := func(what string, got []lk.Predecessor, w string) {
				t.Helper()
				if preds(got) != w {
					t.Errorf("%s: predecessors %q, want %q", what, preds(got), w)
				}
			}
			// Readers queued behind a writer that lapses: granted together,
			// each names the writer, as answered and read later.
			d.acquire(0, "rww", "RW", 2, lk.Exclusive)
			d.acquire(0, "rwr1", "RW", 100, lk.Shared)
			d.acquire(0, "rwr2", "RW", 100, lk.Shared)
			d.advance(5)
			want("lapse: rwr1", d.granted("rwr1", "RW"), "rww/1 exclusive lapsed@2")
			want("lapse: rwr2", d.granted("rwr2", "RW"), "rww/1 exclusive lapsed@2")
			w, err := engine.Do(d.svc, ctx, 6, "RW", func(op *service.Op, lock string) (service.WaitState, error) { return service.Wait(op, "rwr2", lock) })
			d.ok("wait state", nil, err)
			want("lapse: rwr2's wait state", w.Predecessors, "rww/1 exclusive lapsed@2")
			ps, err := engine.Do(d.svc, ctx, 6, 3, func(op *service.Op, token int64) ([]lk.Predecessor, error) {
				return service.Predecessors(op, "RW", token)
			})
			d.ok("predecessors", nil, err)
			want("lapse: rwr2 read later", ps, "rww/1 exclusive lapsed@2")
			// A reader joining them later waited for nobody.
			if r := d.acquire(7, "rwr3", "RW", 100, lk.Shared); r.Predecessors != nil {
				t.Errorf("a reader joining later: predecessors %q", preds(r.Predecessors))
			}

			// The same after a release and after a revoke.
			d.acquire(10, "h", "RR", 100, lk.Exclusive)
			d.acquire(10, "q1", "RR", 100, lk.Shared)
			d.acquire(10, "q2", "RR", 100, lk.Shared)
			d.release(10, "h", "RR")
			want("release: q1", d.granted("q1", "RR"), "h/1 exclusive released@10")
			want("release: q2", d.granted("q2", "RR"), "h/1 exclusive released@10")
			d.acquire(11, "v", "RV", 100, lk.Exclusive)
			d.acquire(11, "v1", "RV", 100, lk.Shared)
			d.acquire(11, "v2", "RV", 100, lk.Shared)
			_, err = engine.Do(d.svc, ctx, 11, lk.RevokeRequest{Client: "v", Lock: "RV"}, service.Revoke)
			d.ok("revoke", nil, err)
			want("revoke: v2", d.granted("v2", "RV"), "v/1 exclusive revoked@11")

			// Three readers, one released in the second they were granted
			// and the writer queued: the writer names all three.
			d.acquire(20, "t1", "T", 100, lk.Shared)
			d.acquire(20, "t2", "T", 100, lk.Shared)
			d.acquire(20, "t3", "T", 100, lk.Shared)
			d.release(20, "t1", "T")
			d.acquire(20, "tw", "T", 100, lk.Exclusive)
			d.release(21, "t2", "T")
			d.release(21, "t3", "T")
			want("writer after readers", d.granted("tw", "T"),
				"t1/1 shared released@20, t2/2 shared released@21, t3/3 shared released@21")

			// A deadlock in one second: both readers aborted for the
			// requester's grant are its predecessors.
			d.acquire(30, "mva", "MX", 100, lk.Exclusive)
			d.acquire(30, "mvb", "MW", 100, lk.Shared)
			d.acquire(30, "mvc", "MW", 100, lk.Shared)
			d.acquire(30, "mvb", "MX", 100, lk.Exclusive)
			d.acquire(30, "mvc", "MX", 100, lk.Exclusive)
			r := d.acquire(30, "mva", "MW", 100, lk.Exclusive)
			if r.Outcome != lk.Granted || len(r.Victims) != 2 {
				t.Fatalf("deadlock: %+v", r)
			}
			want("deadlock", r.Predecessors, "mvb/1 shared aborted@30, mvc/2 shared aborted@30")
		})
	}
}

// TestSelfAbortNamesItsLock: a requester that is its own deadlock's victim
// waited for the lock it asked for, in the mode it asked for: its event
// says so, and so does the abort kept for its status.
func TestSelfAbortNamesItsLock(t *testing.T) {
	d := explainOn(t, historyBackends[0].path(t))
	d.acquire(0, "a", "X", 100, lk.Exclusive)
	d.acquire(1, "b", "Y", 100, lk.Exclusive)
	d.acquire(2, "a", "Y", 100, lk.Exclusive)
	r := d.acquire(3, "b", "X", 100, lk.Shared)
	if r.Outcome != lk.Deadlock || len(r.Victims) != 1 || r.Victims[0] != "b" {
		t.Fatalf("acquire: %+v", r)
	}
	d.mu.Lock()
	var ab *service.Event
	for i, e := range d.events {
		if e.Kind == lk.EventDeadlockAbort {
			ab = &d.events[i]
		}
	}
	d.mu.Unlock()
	if ab == nil {
		t.Fatal("no abort event")
	}
	if ab.Client != "b" || ab.Lock != "X" || ab.Mode != lk.Shared || ab.Position != 0 {
		t.Errorf("abort event: client %q lock %q mode %q position %d, want b X shared 0",
			ab.Client, ab.Lock, ab.Mode, ab.Position)
	}
	w, err := engine.Do(d.svc, context.Background(), 4, "X", func(op *service.Op, lock string) (service.WaitState, error) { return service.Wait(op, "b", lock) })
	d.ok("wait state", nil, err)
	if w.Aborted == nil {
		t.Fatal("no abort kept for b")
	}
}
