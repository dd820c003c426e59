package service_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestAgesSurviveReopen: the registration counter (D1) is not kept in the
// clients table alone; a reopened database must go on from the largest age
// ever given, even when the youngest clients were aborted and deleted.
func TestAgesSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ages.db")
	svc := testutil.OpenDirect(t, path, service.Config{})
	must := func(r lk.AcquireResult, err error) lk.AcquireResult {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "a", Lock: "L1", TTL: 100, Mode: lk.Exclusive})) // age 1
	must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "b", Lock: "L2", TTL: 100, Mode: lk.Exclusive})) // age 2
	must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "b", Lock: "L1", TTL: 100, Mode: lk.Exclusive})) // b queued
	must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "c", Lock: "L3", TTL: 100, Mode: lk.Exclusive}))
	r := must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "c", Lock: "L2", TTL: 100, Mode: lk.Exclusive})) // c (age 3) waits for b
	// a -> c -> b -> a: c, the youngest, is aborted and its L3 goes to a.
	// Everything runs at ts 0: the clock moves once, at the first operation,
	// so only the abort can make the counter be saved.
	r = must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "a", Lock: "L3", TTL: 100, Mode: lk.Exclusive}))
	if r.Outcome != lk.Granted || len(r.Victims) != 1 || r.Victims[0] != "c" {
		t.Fatalf("acquire closing the cycle = %+v, want granted with victim c", r)
	}
	svc.Close()

	svc = testutil.OpenDirect(t, path, service.Config{})
	if ts, ok := svc.Clock(); !ok || ts != 0 {
		t.Errorf("clock after reopen = %d, %v; want 0", ts, ok)
	}
	must(svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "d", Lock: "L4", TTL: 100, Mode: lk.Exclusive}))
	st, err := svc.Status(ctx, 0, lk.StatusRequest{Client: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Age != 4 {
		t.Errorf("age of the first client registered after reopening = %d, want 4 (c had 3)", st.Age)
	}
}

// TestGroupCommit: operations in a Group see each other, events are handed
// out only after the one commit, and a second process opening the file sees
// all of it.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "group.db")
	svc := testutil.OpenDirect(t, path, service.Config{})
	var notified [][]service.Event
	svc.OnCommit(func(es []service.Event) { notified = append(notified, append([]service.Event(nil), es...)) })
	err := svc.Group(ctx, func() {
		if _, err := svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "a", Lock: "L", TTL: 10, Mode: lk.Exclusive}); err != nil {
			t.Error(err)
		}
		if _, err := svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "b", Lock: "L", TTL: 10, Mode: lk.Exclusive}); err != nil {
			t.Error(err)
		}
		if _, err := svc.Release(ctx, 1, lk.ReleaseRequest{Client: "a", Lock: "L"}); err != nil {
			t.Error(err)
		}
		if _, err := svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "c", Lock: "L", TTL: 10, Mode: lk.Exclusive}); err == nil {
			t.Error("an operation with a ts before the clock succeeded inside a group")
		}
		if len(notified) != 0 {
			t.Errorf("events handed out before the commit: %v", notified)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []service.Event{
		{Kind: lk.EventGrant, Client: "a", Lock: "L", At: 0, Token: 1, ExpiresAt: 10, Mode: lk.Exclusive},
		{Kind: lk.EventQueue, Client: "b", Lock: "L", At: 0, Position: 1, Mode: lk.Exclusive},
		{Kind: lk.EventRelease, Client: "a", Lock: "L", At: 1, Token: 1, ExpiresAt: 10, Mode: lk.Exclusive},
		{Kind: lk.EventGrant, Client: "b", Lock: "L", At: 1, Token: 2, ExpiresAt: 11, FromQueue: true, Position: 1, Mode: lk.Exclusive},
	}
	if len(notified) != 1 || !reflect.DeepEqual(notified[0], want) {
		t.Errorf("events after the commit = %+v, want one batch %+v", notified, want)
	}
	svc.Close()
	again := testutil.OpenDirect(t, path, service.Config{})
	in, err := again.Inspect(ctx, 1, lk.InspectRequest{Lock: "L"})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Holders) != 1 || in.Holders[0].Client != "b" || in.Holders[0].Token != 2 || in.Holders[0].ExpiresAt != 11 {
		t.Errorf("after reopening: %+v, want b holding token 2 until 11", in)
	}
}

// TestRevoke: revoking ends the lease at once and hands the lock over at
// that instant with a higher token; revoking a non-holder changes nothing.
func TestRevoke(t *testing.T) {
	ctx := context.Background()
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "a", Lock: "L", TTL: 100, Mode: lk.Exclusive})
	svc.Acquire(ctx, 1, lk.AcquireRequest{Client: "b", Lock: "L", TTL: 30, Mode: lk.Exclusive})
	if _, err := engine.Do(svc, ctx, 5, lk.RevokeRequest{Client: "b", Lock: "L"}, service.Revoke); !errors.Is(err, lk.ErrNotHolder) {
		t.Errorf("revoking a waiter: %v, want not holder", err)
	}
	if _, err := engine.Do(svc, ctx, 7, lk.RevokeRequest{Client: "a", Lock: "L"}, service.Revoke); err != nil {
		t.Fatal(err)
	}
	in, _ := svc.Inspect(ctx, 7, lk.InspectRequest{Lock: "L"})
	if len(in.Holders) != 1 || in.Holders[0] != (lk.Holder{Client: "b", Mode: lk.Exclusive, Token: 2, ExpiresAt: 37}) {
		t.Errorf("after revoke: %+v, want b holding token 2 from 7 to 37", in)
	}
	if _, err := svc.Renew(ctx, 8, lk.RenewRequest{Client: "a", Lock: "L", TTL: 10}); !errors.Is(err, lk.ErrNotHolder) {
		t.Errorf("the revoked holder renewed: %v", err)
	}
}

// TestEvents: lapses and hand-overs are reported at their own instants, a
// refused write with the highest token, a deadlock abort with its cycle.
func TestEvents(t *testing.T) {
	ctx := context.Background()
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	var got []service.Event
	svc.OnCommit(func(es []service.Event) { got = append(got, es...) })
	svc.Acquire(ctx, 0, lk.AcquireRequest{Client: "a", Lock: "L", TTL: 10, Mode: lk.Exclusive})
	svc.Acquire(ctx, 1, lk.AcquireRequest{Client: "b", Lock: "L", TTL: 5, Mode: lk.Exclusive})
	got = nil
	svc.Status(ctx, 100, lk.StatusRequest{Client: "a"}) // a lapses at 10, b holds [10, 15) and lapses at 15
	want := []service.Event{
		{Kind: lk.EventLapse, Client: "a", Lock: "L", At: 10, Token: 1, ExpiresAt: 10, Mode: lk.Exclusive},
		{Kind: lk.EventGrant, Client: "b", Lock: "L", At: 10, Token: 2, ExpiresAt: 15, FromQueue: true, Position: 1, Mode: lk.Exclusive},
		{Kind: lk.EventLapse, Client: "b", Lock: "L", At: 15, Token: 2, ExpiresAt: 15, Mode: lk.Exclusive},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("lapse chain events = %+v\nwant %+v", got, want)
	}
	svc.Write(ctx, 100, lk.WriteRequest{Lock: "L", Key: "k", Value: "v", Token: 2})
	got = nil
	svc.Write(ctx, 100, lk.WriteRequest{Lock: "L", Key: "k", Value: "w", Token: 1})
	if len(got) != 1 || got[0].Kind != lk.EventStaleWrite || got[0].Token != 1 || got[0].Highest != 2 {
		t.Errorf("stale write events = %+v", got)
	}
	svc.Acquire(ctx, 101, lk.AcquireRequest{Client: "x", Lock: "M1", TTL: 100, Mode: lk.Exclusive})
	svc.Acquire(ctx, 101, lk.AcquireRequest{Client: "y", Lock: "M2", TTL: 100, Mode: lk.Exclusive})
	svc.Acquire(ctx, 101, lk.AcquireRequest{Client: "y", Lock: "M1", TTL: 100, Mode: lk.Exclusive})
	got = nil
	svc.Acquire(ctx, 101, lk.AcquireRequest{Client: "x", Lock: "M2", TTL: 100, Mode: lk.Exclusive})
	var aborted *service.Event
	for i := range got {
		if got[i].Kind == lk.EventDeadlockAbort {
			aborted = &got[i]
			// What the victim lost is named before anything is granted
			// from it: read in order, the events never show M2 granted
			// while y still holds it.
			for _, e := range got[:i] {
				if e.Kind == lk.EventGrant {
					t.Errorf("grant %+v before the abort that made room for it", e)
				}
			}
		}
	}
	if aborted == nil || aborted.Client != "y" || !reflect.DeepEqual(aborted.Cycle, []string{"x", "y"}) {
		t.Errorf("deadlock events = %+v, want y aborted on the cycle [x y]", got)
	} else {
		// y held M2 (token 1) and waited for M1 at position 1; x asked.
		lost := []lk.Holder{{Lock: "M2", Mode: lk.Exclusive, Token: 1, ExpiresAt: 201}}
		if aborted.Requester != "x" || !reflect.DeepEqual(aborted.Lost, lost) || aborted.Lock != "M1" ||
			aborted.Position != 1 || aborted.Mode != lk.Exclusive {
			t.Errorf("abort event %+v, want requester x, lost %+v, queue entry M1 position 1 exclusive", *aborted, lost)
		}
	}
}

// TestCancelledContext: a cancelled context starts no operation and changes
// nothing (an operation that has started runs to completion regardless).
func TestCancelledContext(t *testing.T) {
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := svc.Acquire(ctx, 5, lk.AcquireRequest{Client: "a", Lock: "L", TTL: 10, Mode: lk.Exclusive}); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire with a cancelled context: %v", err)
	}
	if ts, set := svc.Clock(); set {
		t.Errorf("the clock moved to %d", ts)
	}
	st, err := svc.Status(context.Background(), 0, lk.StatusRequest{Client: "a"})
	if err != nil || st.Age != 0 {
		t.Errorf("a was registered: %+v %v", st, err)
	}
}

// TestStatusPosition: status tells the rank of a client's wait, counted
// after withdrawals ahead of it, unless the request leaves it out (as the
// replay does, to keep a long queue's statuses linear).
func TestStatusPosition(t *testing.T) {
	ctx := context.Background()
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	for _, c := range []string{"h", "w1", "w2", "w3"} {
		if _, err := svc.Acquire(ctx, 0, lk.AcquireRequest{Client: c, Lock: "Q", TTL: 100, Mode: lk.Exclusive}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := svc.Status(ctx, 1, lk.StatusRequest{Client: "w3"})
	if err != nil || st.Waiting == nil || *st.Waiting != (lk.WaitingFor{Lock: "Q", Position: 3}) {
		t.Fatalf("status of the third waiter = %+v, %v; want waiting for Q at position 3", st, err)
	}
	if _, err := svc.Release(ctx, 2, lk.ReleaseRequest{Client: "w1", Lock: "Q"}); err != nil {
		t.Fatal(err)
	}
	st, _ = svc.Status(ctx, 3, lk.StatusRequest{Client: "w3"})
	if st.Waiting == nil || st.Waiting.Position != 2 {
		t.Errorf("after a withdrawal ahead: %+v, want position 2", st.Waiting)
	}
	st, _ = svc.Status(ctx, 3, lk.StatusRequest{Client: "w3", WithoutPosition: true})
	if st.Waiting == nil || *st.Waiting != (lk.WaitingFor{Lock: "Q"}) {
		t.Errorf("WithoutPosition: %+v, want Q without a position", st.Waiting)
	}
	in, _ := svc.Inspect(ctx, 3, lk.InspectRequest{Lock: "Q"})
	want := []lk.Waiter{{Client: "w2", Mode: lk.Exclusive, Position: 1}, {Client: "w3", Mode: lk.Exclusive, Position: 2}}
	if !reflect.DeepEqual(in.Queue, want) || in.Lock != "Q" {
		t.Errorf("inspect = %+v, want lock Q, queue %+v", in, want)
	}
}
