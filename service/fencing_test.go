package service_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// fencingBackends are the databases strict fencing is tested on; each gives
// a new database, which a test may open more than once.
var fencingBackends = []struct {
	name string
	path func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "f.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// store is a service under test with the few calls these tests make, each
// failing the test on anything but a result.
type store struct {
	t   *testing.T
	svc *engine.Direct
}

func openStore(t *testing.T, path string, strict bool) *store {
	t.Helper()
	return openStoreWith(t, path, service.Config{StrictFencing: strict})
}

func openStoreWith(t *testing.T, path string, opts service.Config) *store {
	t.Helper()
	svc, err := engine.OpenDirect(context.Background(), path, repo.Options{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return &store{t, svc}
}

func (s *store) acquire(client, lock string) int64 {
	s.t.Helper()
	r, err := s.svc.Acquire(context.Background(), 0, lk.AcquireRequest{Client: client, Lock: lock, TTL: 3600, Mode: lk.Exclusive})
	if err != nil || r.Outcome != lk.Granted {
		s.t.Fatalf("acquire %s %s: %+v %v", client, lock, r, err)
	}
	return r.Token
}

func (s *store) release(client, lock string) {
	s.t.Helper()
	if _, err := s.svc.Release(context.Background(), 0, lk.ReleaseRequest{Client: client, Lock: lock}); err != nil {
		s.t.Fatalf("release %s %s: %v", client, lock, err)
	}
}

// write returns the write's refusal, nil when it was accepted.
func (s *store) write(lock, key, value string, token int64, mayActAs func(string) bool) error {
	s.t.Helper()
	_, err := engine.Do(s.svc, context.Background(), 0, lk.WriteRequest{Lock: lock, Key: key, Value: value, Token: token}, func(op *service.Op, q lk.WriteRequest) (lk.WriteResult, error) { return service.Write(op, q, mayActAs) })
	if err != nil && !errors.Is(err, lk.ErrTokenNotGranted) && !errors.Is(err, lk.ErrStaleToken) {
		s.t.Fatalf("write %s/%s with %d: %v", lock, key, token, err)
	}
	return err
}

// read gives "value@token", or "<none>".
func (s *store) read(lock, key string) string {
	s.t.Helper()
	r, err := s.svc.Read(context.Background(), 0, lk.ReadRequest{Lock: lock, Key: key})
	if err != nil {
		s.t.Fatal(err)
	}
	if r.Value == nil {
		return "<none>"
	}
	return *r.Value + "@" + strconv.FormatInt(r.Token, 10)
}

func notGranted(t *testing.T, err error, says string) {
	t.Helper()
	if !errors.Is(err, lk.ErrTokenNotGranted) || !strings.Contains(lk.Message(err), says) {
		t.Errorf("got %v, want token_not_granted saying %q", err, says)
	}
}

// TestStrictFencing: under StrictFencing a write is accepted only with a
// token issued for its lock. A token above the lock's last issued one, or
// any token on a lock never acquired, is refused as token_not_granted and
// changes nothing: not the value, not the fence (a lower granted token still
// writes). L6 holds on top: a granted but stale token is stale.
func TestStrictFencing(t *testing.T) {
	for _, b := range fencingBackends {
		t.Run(b.name, func(t *testing.T) {
			s := openStore(t, b.path(t), true)
			notGranted(t, s.write("never", "k", "v", 1, nil), "no token was ever granted for never")
			notGranted(t, s.write("never", "k", "v", math.MaxInt64, nil), "no token was ever granted")
			if got := s.read("never", "k"); got != "<none>" {
				t.Errorf("never/k after refused writes: %s", got)
			}

			tok := s.acquire("a", "L") // 1
			if err := s.write("L", "k", "v1", tok, nil); err != nil {
				t.Fatalf("write with the granted token: %v", err)
			}
			notGranted(t, s.write("L", "k", "forged", tok+1, nil), "token 2 was never granted for L: its last issued token is 1")
			notGranted(t, s.write("L", "k2", "forged", math.MaxInt64, nil), "never granted")
			if got := s.read("L", "k"); got != "v1@1" {
				t.Errorf("L/k after refused writes: %s, want v1@1", got)
			}
			if got := s.read("L", "k2"); got != "<none>" {
				t.Errorf("L/k2 after a refused write: %s", got)
			}
			// The fence did not move: the holder's token still writes.
			if err := s.write("L", "k", "v2", tok, nil); err != nil {
				t.Errorf("the holder's write after the refused ones: %v", err)
			}

			s.release("a", "L")
			tok2 := s.acquire("b", "L") // 2
			if err := s.write("L", "k", "v3", tok2, nil); err != nil {
				t.Fatalf("b's write: %v", err)
			}
			if err := s.write("L", "k", "late", tok, nil); !errors.Is(err, lk.ErrStaleToken) {
				t.Errorf("a's late write: %v, want stale_token", err)
			}
			if got := s.read("L", "k"); got != "v3@2" {
				t.Errorf("L/k: %s, want v3@2", got)
			}

			// In a group commit (the server's), a refusal is an answer: the
			// group commits the rest.
			var refused, accepted error
			if err := s.svc.Group(context.Background(), func() {
				refused = s.write("L", "g", "forged", 3, nil)
				accepted = s.write("L", "g2", "ok", tok2, nil)
			}); err != nil {
				t.Fatalf("group with a refused write: %v", err)
			}
			notGranted(t, refused, "never granted")
			if accepted != nil || s.read("L", "g2") != "ok@2" || s.read("L", "g") != "<none>" {
				t.Errorf("group: accepted %v, g2 %s, g %s", accepted, s.read("L", "g2"), s.read("L", "g"))
			}
		})
	}
}

// TestStrictFencingOffKeepsL6: without StrictFencing (leasekeeper run, the
// replayed golden cases) the store is the contract's: any token at least the
// highest accepted, granted or not, on a lock that need not exist.
func TestStrictFencingOffKeepsL6(t *testing.T) {
	for _, b := range fencingBackends {
		t.Run(b.name, func(t *testing.T) {
			s := openStore(t, b.path(t), false)
			if err := s.write("never", "k", "v", 5, nil); err != nil {
				t.Errorf("write on a lock never acquired: %v", err)
			}
			s.acquire("a", "L")
			if err := s.write("L", "k", "v", math.MaxInt64, nil); err != nil {
				t.Errorf("write above the last issued token: %v", err)
			}
			if err := s.write("L", "k", "v", 1, nil); !errors.Is(err, lk.ErrStaleToken) {
				t.Errorf("write below the fence: %v, want stale_token", err)
			}
		})
	}
}

// TestUnfence: a lock fenced beyond its last issued token (by a server
// without strict fencing) refuses its holders' writes as stale; Unfence sets
// the fence back to the last issued token, reports it as an event, and the
// holder writes again. It never lowers a fence at or below the last issued
// token, and on a lock the store never wrote it changes nothing.
func TestUnfence(t *testing.T) {
	ctx := context.Background()
	for _, b := range fencingBackends {
		t.Run(b.name, func(t *testing.T) {
			path := b.path(t)
			loose := openStore(t, path, false)
			tok := loose.acquire("a", "L")
			if err := loose.write("L", "k", "forged", math.MaxInt64, nil); err != nil {
				t.Fatal(err)
			}
			loose.svc.Close()

			s := openStore(t, path, true)
			var events []service.Event
			s.svc.OnCommit(func(es []service.Event) { events = append(events, es...) })
			if err := s.write("L", "k", "honest", tok, nil); !errors.Is(err, lk.ErrStaleToken) {
				t.Fatalf("the holder's write on the fenced lock: %v, want stale_token", err)
			}
			// token_not_granted comes first: the forged token does not pass
			// for merely stale, nor for current.
			notGranted(t, s.write("L", "k", "forged", math.MaxInt64, nil), "never granted")

			events = nil
			res, err := engine.Do(s.svc, ctx, 0, lk.UnfenceRequest{Lock: "L", By: "ops"}, service.Unfence)
			if err != nil || res != (lk.UnfenceResult{Outcome: lk.OK, Was: math.MaxInt64, Highest: tok}) {
				t.Fatalf("unfence: %+v %v", res, err)
			}
			want := service.Event{Kind: lk.EventUnfence, Lock: "L", Token: tok, Highest: math.MaxInt64, By: "ops"}
			if len(events) != 1 || events[0].Kind != want.Kind || events[0].Lock != want.Lock ||
				events[0].Token != want.Token || events[0].Highest != want.Highest || events[0].By != want.By {
				t.Errorf("events of the unfence: %+v, want one %+v", events, want)
			}
			if err := s.write("L", "k", "honest", tok, nil); err != nil {
				t.Fatalf("the holder's write after unfence: %v", err)
			}
			if got := s.read("L", "k"); got != "honest@1" {
				t.Errorf("L/k: %s, want honest@1", got)
			}

			// Nothing to repair: the fence stays, no event. Below the last
			// issued token (b has not written yet) it is not raised either:
			// a's writes go on until b's first (L6).
			events = nil
			s.release("a", "L")
			tok2 := s.acquire("b", "L")
			if res, err := engine.Do(s.svc, ctx, 0, lk.UnfenceRequest{Lock: "L"}, service.Unfence); err != nil || res != (lk.UnfenceResult{Outcome: lk.OK, Was: tok, Highest: tok}) {
				t.Errorf("unfence of a fence below the last issued token: %+v %v", res, err)
			}
			if err := s.write("L", "k", "a late", tok, nil); err != nil {
				t.Errorf("a's write before b's first, after a no-op unfence: %v", err)
			}
			if err := s.write("L", "k", "b", tok2, nil); err != nil {
				t.Fatal(err)
			}
			if res, err := engine.Do(s.svc, ctx, 0, lk.UnfenceRequest{Lock: "L"}, service.Unfence); err != nil || res != (lk.UnfenceResult{Outcome: lk.OK, Was: tok2, Highest: tok2}) {
				t.Errorf("unfence of a sound lock: %+v %v", res, err)
			}
			if err := s.write("L", "k", "late", tok, nil); !errors.Is(err, lk.ErrStaleToken) {
				t.Errorf("a's late write after a no-op unfence: %v, want stale_token", err)
			}
			if res, err := engine.Do(s.svc, ctx, 0, lk.UnfenceRequest{Lock: "unwritten"}, service.Unfence); err != nil || res != (lk.UnfenceResult{Outcome: lk.OK}) {
				t.Errorf("unfence of a lock never written: %+v %v", res, err)
			}
			for _, e := range events {
				if e.Kind == lk.EventUnfence {
					t.Errorf("an unfence that changed nothing reported %+v", e)
				}
			}
			if _, err := engine.Do(s.svc, ctx, 0, lk.UnfenceRequest{}, service.Unfence); !errors.Is(err, lk.ErrInvalidArguments) {
				t.Errorf("unfence without a lock: %v", err)
			}
		})
	}
}

// TestWriteWithinClientIDs: a caller limited to some client ids (a client
// principal) writes only with a token granted to one of them, by the
// token's row of grants; without that limit, any granted token writes.
func TestWriteWithinClientIDs(t *testing.T) {
	etl := func(c string) bool { return strings.HasPrefix(c, "etl-") }
	for _, b := range fencingBackends {
		t.Run(b.name, func(t *testing.T) {
			s := openStore(t, b.path(t), true)
			web := s.acquire("web-1", "L")
			notGranted(t, s.write("L", "k", "theirs", web, etl), "token 1 of L was granted to a client id this principal may not act as")
			if got := s.read("L", "k"); got != "<none>" {
				t.Errorf("L/k after a refused write: %s", got)
			}
			if err := s.write("L", "k", "admin", web, nil); err != nil {
				t.Errorf("an unlimited caller's write with web-1's token: %v", err)
			}
			s.release("web-1", "L")
			own := s.acquire("etl-1", "L")
			if err := s.write("L", "k", "mine", own, etl); err != nil {
				t.Errorf("etl's write with its own token: %v", err)
			}
			// Its own token after the lease ended still writes (L6 judges
			// staleness), as long as history keeps the row.
			s.release("etl-1", "L")
			if err := s.write("L", "k", "mine again", own, etl); err != nil {
				t.Errorf("etl's write with its ended lease's token: %v", err)
			}
			// A token above the last issued one is refused as never granted,
			// whoever asks.
			notGranted(t, s.write("L", "k", "forged", own+1, etl), "never granted")
			if got := s.read("L", "k"); got != "mine again@2" {
				t.Errorf("L/k: %s, want mine again@2", got)
			}

			// History keeping one token per lock: etl-1's row goes with the
			// next grant, and its token with it, though the fence (at 1)
			// would still take it.
			s = openStoreWith(t, b.path(t), service.Config{StrictFencing: true, History: service.HistoryRetention{Keep: 1}})
			old := s.acquire("etl-1", "P")
			s.release("etl-1", "P")
			if err := s.write("P", "k", "before", old, etl); err != nil {
				t.Fatalf("etl-1's write with its ended lease's token, row kept: %v", err)
			}
			s.acquire("etl-2", "P")
			notGranted(t, s.write("P", "k", "after", old, etl), "token 1 of P has no grant on record: its lease ended long ago")
			if got := s.read("P", "k"); got != "before@1" {
				t.Errorf("P/k: %s, want before@1", got)
			}
		})
	}
}
