package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// explainDriver runs operations on a service opened with Options.Explain
// and keeps the events of the last committed transaction.
type explainDriver struct {
	historyDriver
	mu     sync.Mutex
	events []service.Event
}

func openExplain(t *testing.T, path string, opts service.Config) *explainDriver {
	t.Helper()
	svc, err := engine.OpenDirect(context.Background(), path, repo.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	d := &explainDriver{historyDriver: historyDriver{t: t, svc: svc}}
	svc.OnCommit(func(es []service.Event) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.events = append([]service.Event(nil), es...)
	})
	return d
}

// granted returns the predecessors the last transaction's grant of lock to
// client carried; it fails when there was no such grant.
func (d *explainDriver) granted(client, lock string) []lk.Predecessor {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.events {
		if e.Kind == lk.EventGrant && e.Client == client && e.Lock == lock {
			return e.Predecessors
		}
	}
	d.t.Fatalf("no grant of %s to %s in %+v", lock, client, d.events)
	return nil
}

func (d *explainDriver) release(ts int64, client, lock string) {
	d.t.Helper()
	_, err := d.svc.Release(context.Background(), ts, lk.ReleaseRequest{Client: client, Lock: lock})
	d.ok("release", nil, err)
}

func (d *explainDriver) advance(ts int64) {
	d.t.Helper()
	d.ok("advance", nil, d.svc.Advance(context.Background(), ts))
}

// preds writes predecessors as the tests compare them: client/token mode
// ended@ended_at, in order.
func preds(ps []lk.Predecessor) string {
	var out []string
	for _, p := range ps {
		c := "null"
		if p.Client != nil {
			c = *p.Client
		}
		out = append(out, c+"/"+itoa(p.Token)+" "+string(p.Mode)+" "+string(p.Ended)+"@"+itoa(p.EndedAt))
	}
	return strings.Join(out, ", ")
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func explainOn(t *testing.T, path string) *explainDriver {
	return openExplain(t, path, service.Config{Explain: true})
}

// TestPredecessors: which leases a grant names, on the spot and from the
// queue, after releases, lapses (at their expires_at), and reader crowds.
func TestPredecessors(t *testing.T) {
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
			// A lock's first grant has none.
			r := d.acquire(0, "a", "L", 5, lk.Exclusive)
			want("first grant", r.Predecessors, "")
			// A lapse at 5, noticed at 10: the next holder names it, ended
			// at its expires_at.
			r = d.acquire(10, "b", "L", 100, lk.Exclusive)
			want("after a lapse", r.Predecessors, "a/1 exclusive lapsed@5")
			if lk.WorstEnding(r.Predecessors) != lk.EndLapsed {
				t.Errorf("worst ending %q", lk.WorstEnding(r.Predecessors))
			}
			// A waiter granted by a release names the released lease only.
			d.acquire(11, "c", "L", 100, lk.Exclusive)
			d.release(12, "b", "L")
			want("from the queue", d.granted("c", "L"), "b/2 exclusive released@12")
			w, err := engine.Do(d.svc, ctx, 13, "L", func(op *service.Op, lock string) (service.WaitState, error) { return service.Wait(op, "c", lock) })
			d.ok("wait state", nil, err)
			want("wait state", w.Predecessors, "b/2 exclusive released@12")
			ps, err := engine.Do(d.svc, ctx, 13, 3, func(op *service.Op, token int64) ([]lk.Predecessor, error) {
				return service.Predecessors(op, "L", token)
			})
			d.ok("predecessors", nil, err)
			want("read later", ps, "b/2 exclusive released@12")

			// Readers before a writer: all of them, in the order they ended.
			d.release(20, "c", "L")
			r = d.acquire(21, "r1", "L", 100, lk.Shared)
			want("a reader after a writer", r.Predecessors, "c/3 exclusive released@20")
			r = d.acquire(22, "r2", "L", 9, lk.Shared) // lapses at 31
			want("a reader joining a live reader", r.Predecessors, "")
			d.acquire(23, "w", "L", 100, lk.Exclusive)
			d.release(24, "r1", "L")
			d.advance(40)
			want("a writer after readers", d.granted("w", "L"),
				"r1/4 shared released@24, r2/5 shared lapsed@31")

			// A release and a new grant in the same second.
			d.release(50, "w", "L")
			d.acquire(60, "x", "L", 100, lk.Exclusive)
			d.release(60, "x", "L")
			r = d.acquire(70, "y", "L", 100, lk.Shared)
			want("after a lease of no time", r.Predecessors, "x/7 exclusive released@60")

			// A chain of hand-overs settled in one operation: each grant
			// names the lease just before it, not the whole chain.
			d.acquire(100, "p", "M", 5, lk.Exclusive)  // lapses at 105
			d.acquire(101, "q", "M", 3, lk.Exclusive)  // granted at 105, lapses at 108
			d.acquire(102, "s", "M", 50, lk.Exclusive) // granted at 108
			d.advance(120)
			want("chain: q", d.granted("q", "M"), "p/1 exclusive lapsed@105")
			want("chain: s", d.granted("s", "M"), "q/2 exclusive lapsed@108")

			// A reader that joins a live reader has none, even when the
			// lock's previous grant has ended; read later too, once that
			// reader has ended.
			d.acquire(200, "n1", "N", 100, lk.Shared)
			d.acquire(201, "n2", "N", 100, lk.Shared)
			d.release(202, "n2", "N")
			r = d.acquire(203, "n3", "N", 100, lk.Shared)
			want("a reader joining a reader, after another left", r.Predecessors, "")
			d.release(210, "n1", "N")
			ps, err = engine.Do(d.svc, ctx, 211, 3, func(op *service.Op, token int64) ([]lk.Predecessor, error) {
				return service.Predecessors(op, "N", token)
			})
			d.ok("predecessors", nil, err)
			want("a reader joining a reader, read later", ps, "")
		})
	}
}

// TestPredecessorsOff: without Options.Explain (leasekeeper run), grants
// carry none.
func TestPredecessorsOff(t *testing.T) {
	d := openExplain(t, historyBackends[0].path(t), service.Config{})
	d.acquire(0, "a", "L", 5, lk.Exclusive)
	if r := d.acquire(10, "b", "L", 5, lk.Exclusive); r.Predecessors != nil {
		t.Errorf("predecessors without Explain: %+v", r.Predecessors)
	}
}

// abortLine writes an abort as the tests compare it.
func abortLine(a *lk.Abort) string {
	if a == nil {
		return "<nil>"
	}
	var cycle []string
	for _, m := range a.Cycle {
		c := "null"
		if m.Client != nil {
			c = *m.Client
		}
		cycle = append(cycle, c+"("+itoa(m.Age)+")->"+m.WaitsFor)
	}
	v := "null"
	if a.Victim != nil {
		v = *a.Victim
	}
	return v + "(" + itoa(a.Age) + ") [" + strings.Join(cycle, " ") + "]"
}

// TestAbortsExplained: an answer with victims explains each, in order; the
// victim's status keeps the explanation until it registers again, and a
// renew of a lease it lost says so.
func TestAbortsExplained(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			d := explainOn(t, b.path(t))
			// The requester is the youngest: it is the victim.
			d.acquire(0, "a", "X", 100, lk.Exclusive)
			d.acquire(1, "b", "Y", 100, lk.Exclusive)
			d.acquire(2, "a", "Y", 100, lk.Exclusive)
			r := d.acquire(3, "b", "X", 100, lk.Exclusive)
			if r.Outcome != lk.Deadlock || len(r.Aborts) != 1 {
				t.Fatalf("acquire: %+v", r)
			}
			const want = "b(2) [a(1)->Y b(2)->X]"
			if got := abortLine(&r.Aborts[0]); got != want {
				t.Errorf("abort %s, want %s", got, want)
			}
			st, err := d.svc.Status(ctx, 4, lk.StatusRequest{Client: "b"})
			d.ok("status", nil, err)
			if got := abortLine(st.Aborted); got != want {
				t.Errorf("status: aborted %s, want %s", got, want)
			}
			if b.read {
				st, err := engine.Apart(d.svc, ctx, 4, lk.StatusRequest{Client: "b"}, service.Status)
				d.ok("read status", nil, err)
				if got := abortLine(st.Aborted); got != want {
					t.Errorf("read status: aborted %s, want %s", got, want)
				}
			}
			// a was granted Y by the abort: it names b's lease.
			if got := preds(d.granted("a", "Y")); got != "b/1 exclusive aborted@3" {
				t.Errorf("a's grant of Y: predecessors %q", got)
			}
			_, err = d.svc.Renew(ctx, 5, lk.RenewRequest{Client: "b", Lock: "Y", TTL: 10})
			if lk.CodeOf(err) != lk.CodeNotHolder || !strings.Contains(lk.Message(err), "aborted as a deadlock victim") {
				t.Errorf("renew of a lease lost in an abort: %v", err)
			}
			// A lease that was never b's is not explained by the abort.
			_, err = d.svc.Renew(ctx, 5, lk.RenewRequest{Client: "b", Lock: "X", TTL: 10})
			if lk.CodeOf(err) != lk.CodeNotHolder || strings.Contains(lk.Message(err), "deadlock") {
				t.Errorf("renew of a lock b never held: %v", err)
			}
			// Registered again, b has a new age and no abort to show.
			d.acquire(6, "b", "Z", 100, lk.Exclusive)
			st, err = d.svc.Status(ctx, 7, lk.StatusRequest{Client: "b"})
			d.ok("status", nil, err)
			if st.Aborted != nil {
				t.Errorf("status after registering again: aborted %s", abortLine(st.Aborted))
			}

			// Another client is the youngest: the requester is granted
			// what the victim held.
			d.acquire(10, "c", "P", 100, lk.Exclusive) // age 4
			d.acquire(11, "e", "Q", 100, lk.Exclusive) // age 5
			d.acquire(12, "e", "P", 100, lk.Exclusive)
			r = d.acquire(13, "c", "Q", 100, lk.Exclusive)
			if r.Outcome != lk.Granted || len(r.Victims) != 1 || r.Victims[0] != "e" || len(r.Aborts) != 1 {
				t.Fatalf("acquire: %+v", r)
			}
			if got, want := abortLine(&r.Aborts[0]), "e(5) [c(4)->Q e(5)->P]"; got != want {
				t.Errorf("abort %s, want %s", got, want)
			}
			if got := preds(r.Predecessors); got != "e/1 exclusive aborted@13" {
				t.Errorf("c's grant of Q: predecessors %q", got)
			}
			w, err := engine.Do(d.svc, ctx, 14, "P", func(op *service.Op, lock string) (service.WaitState, error) { return service.Wait(op, "e", lock) })
			d.ok("wait state", nil, err)
			if w.Registered || abortLine(w.Aborted) != "e(5) [c(4)->Q e(5)->P]" {
				t.Errorf("wait state of the victim: %+v, %s", w, abortLine(w.Aborted))
			}
		})
	}
}

// TestAbortsPruned: an abort goes with the history's days.
func TestAbortsPruned(t *testing.T) {
	ctx := context.Background()
	d := openExplain(t, historyBackends[0].path(t), service.Config{Explain: true,
		History: service.HistoryRetention{Days: 1}})
	d.acquire(0, "a", "X", 100, lk.Exclusive)
	d.acquire(1, "b", "Y", 100, lk.Exclusive)
	d.acquire(2, "a", "Y", 100, lk.Exclusive)
	d.acquire(3, "b", "X", 100, lk.Exclusive)
	st, err := d.svc.Status(ctx, 86400, lk.StatusRequest{Client: "b"})
	d.ok("status", nil, err)
	if st.Aborted == nil {
		t.Fatal("abort gone within its day")
	}
	d.advance(86500) // the pruning looks once a minute
	st, err = d.svc.Status(ctx, 86500, lk.StatusRequest{Client: "b"})
	d.ok("status", nil, err)
	if st.Aborted != nil {
		t.Errorf("abort kept past its day: %s", abortLine(st.Aborted))
	}
}

func waits(q []lk.Waiter) string {
	var out []string
	for _, w := range q {
		v := "-"
		if w.EstimatedWait != nil {
			b, _ := json.Marshal(*w.EstimatedWait)
			v = string(b)
		}
		out = append(out, w.Client+":"+v)
	}
	return strings.Join(out, " ")
}

// TestEstimatedWait: the estimate from the lock's hold times, the current
// holder's expected rest, and the turns ahead (a run of readers is one).
func TestEstimatedWait(t *testing.T) {
	for _, b := range historyBackends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			d := explainOn(t, b.path(t))
			// No history: no estimate.
			d.acquire(0, "a", "L", 60, lk.Exclusive)
			if r := d.acquire(1, "z", "L", 60, lk.Exclusive); r.Outcome != lk.Queued || r.EstimatedWait != nil {
				t.Fatalf("queued without history: %+v", r)
			}
			d.release(2, "z", "L")
			// Exclusive holds of 10 s and 20 s: a mean of 15.
			d.release(10, "a", "L")
			d.acquire(30, "a", "L", 60, lk.Exclusive)
			d.release(50, "a", "L")
			d.acquire(100, "a", "L", 60, lk.Exclusive) // expected to leave at 115
			r := d.acquire(104, "b", "L", 60, lk.Exclusive)
			if r.EstimatedWait == nil || *r.EstimatedWait != 11 {
				t.Fatalf("queued behind a holder: %+v (estimate %v)", r, r.EstimatedWait)
			}
			d.acquire(105, "c", "L", 60, lk.Shared)
			d.acquire(105, "e", "L", 60, lk.Shared)
			d.acquire(105, "f", "L", 60, lk.Exclusive)
			in, err := d.svc.Inspect(ctx, 106, lk.InspectRequest{Lock: "L"})
			d.ok("inspect", nil, err)
			// b after a's 9 s left; the readers together after b's 15;
			// f after the readers' turn, 15 (no shared hold to learn from).
			if got, want := waits(in.Queue), "b:9 c:24 e:24 f:39"; got != want {
				t.Errorf("inspect: waits %s, want %s", got, want)
			}
			st, err := d.svc.Status(ctx, 106, lk.StatusRequest{Client: "e"})
			d.ok("status", nil, err)
			if st.Waiting == nil || st.Waiting.EstimatedWait == nil || *st.Waiting.EstimatedWait != 24 {
				t.Errorf("status: waiting %+v", st.Waiting)
			}
			w, err := engine.Do(d.svc, ctx, 106, "L", func(op *service.Op, lock string) (service.WaitState, error) { return service.Wait(op, "f", lock) })
			d.ok("wait state", nil, err)
			if w.EstimatedWait == nil || *w.EstimatedWait != 39 {
				t.Errorf("wait state: estimate %v", w.EstimatedWait)
			}
			// A holder past its expected hold: its turn is over now.
			in, err = d.svc.Inspect(ctx, 130, lk.InspectRequest{Lock: "L"})
			d.ok("inspect", nil, err)
			if got, want := waits(in.Queue), "b:0 c:15 e:15 f:30"; got != want {
				t.Errorf("inspect past the mean: waits %s, want %s", got, want)
			}
		})
	}
}
