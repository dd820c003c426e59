package server_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

var settles atomic.Int64

// settle makes sure st gets the events of f's server's commits from now
// on: a stream opened while its server was still starting to listen to
// PostgreSQL gets a reset once it does. It returns the id of the last
// event seen.
func settle(t *testing.T, f *fixture, st *sseStream) int64 {
	t.Helper()
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("a stream saw none of 100 acquires")
		}
		lock := fmt.Sprint("settle-", settles.Add(1))
		f.call("POST", "/v1/acquire", map[string]any{"client": "settler", "lock": lock, "ttl": 10})
		f.call("POST", "/v1/release", map[string]any{"client": "settler", "lock": lock})
		deadline := time.After(500 * time.Millisecond)
		for {
			select {
			case e := <-st.events:
				if d := e.decoded(t); d.Lock == lock && d.Kind == "release" {
					return d.ID
				}
				continue
			case <-deadline:
			}
			break
		}
	}
}

// TestEventsPeers: with two servers on one PostgreSQL database, each
// server's stream carries the events of both, in one order, with ids
// that go up by one.
func TestEventsPeers(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := engine.NewManualClock(time.Unix(1000, 0))
	a := startWith(t, dsn, clock, engine.Options{})
	b := startWith(t, dsn, clock, engine.Options{})
	sa, sb := openEvents(t, a.url, "", nil), openEvents(t, b.url, "", nil)
	settle(t, a, sa)
	last := settle(t, b, sb)
	sa.quiet(200 * time.Millisecond)
	sb.quiet(0)
	sa = openEvents(t, a.url, "", map[string]string{"Last-Event-ID": strconv.FormatInt(last, 10)})

	// Hand-overs across servers, and both servers busy at once.
	a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 10})
	b.call("POST", "/v1/acquire", map[string]any{"client": "y", "lock": "L", "ttl": 10})
	b.call("POST", "/v1/release", map[string]any{"client": "x", "lock": "L"})
	const rounds = 40
	concurrently(2, func(w int) {
		f := []*fixture{a, b}[w]
		for i := range rounds {
			lock := fmt.Sprintf("s%d-%d", w, i)
			f.call("POST", "/v1/acquire", map[string]any{"client": fmt.Sprint("w", w), "lock": lock, "ttl": 10})
			f.call("POST", "/v1/release", map[string]any{"client": fmt.Sprint("w", w), "lock": lock})
		}
	})
	end := last + 4 + 2*2*rounds
	ga, gb := sa.until(end, 10*time.Second), sb.until(end, 10*time.Second)
	expectKinds(t, ga[:4], fmt.Sprint(last+1, ":grant:x:L"), fmt.Sprint(last+2, ":queue:y:L"),
		fmt.Sprint(last+3, ":release:x:L"), fmt.Sprint(last+4, ":grant:y:L"))
	if len(ga) != len(gb) {
		t.Fatalf("server a streamed %d events, b %d", len(ga), len(gb))
	}
	for i := range ga {
		if ga[i] != gb[i] {
			t.Fatalf("event %d: a streamed %+v, b %+v", i, ga[i], gb[i])
		}
		if want := strconv.FormatInt(last+1+int64(i), 10); ga[i].id != want {
			t.Fatalf("event %d has id %s, want %s: %v", i, ga[i].id, want, kinds(t, ga))
		}
	}
}

// TestEventsDeliveryDelay measures how long an acquire's grant takes to
// reach a reader: on SQLite, a reader of the same server; on PostgreSQL,
// a reader of another server. It logs the median and the 99th percentile,
// from the acquire's request and from its answer, and checks the
// acceptance bound: within a second.
func TestEventsDeliveryDelay(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		clock := engine.NewManualClock(time.Unix(1000, 0))
		a := startWith(t, path, clock, engine.Options{})
		reader := a
		if backend == "postgres" {
			reader = startWith(t, path, clock, engine.Options{})
		}
		st := openEvents(t, reader.url, "?client=timed", nil)
		settle(t, a, openEvents(t, reader.url, "", nil))
		st.quiet(100 * time.Millisecond)
		const n = 300
		var fromRequest, fromAnswer []time.Duration
		for i := range n {
			lock := fmt.Sprint("d-", i)
			t0 := time.Now()
			a.call("POST", "/v1/acquire", map[string]any{"client": "timed", "lock": lock, "ttl": 10})
			t1 := time.Now()
			e := st.next(5 * time.Second)
			t2 := time.Now()
			if d := e.decoded(t); d.Lock != lock || d.Kind != "grant" {
				t.Fatalf("got %s, want the grant of %s", e.data, lock)
			}
			fromRequest = append(fromRequest, t2.Sub(t0))
			fromAnswer = append(fromAnswer, t2.Sub(t1))
			a.call("POST", "/v1/release", map[string]any{"client": "timed", "lock": lock})
			st.next(5 * time.Second)
		}
		slices.Sort(fromRequest)
		slices.Sort(fromAnswer)
		pct := func(d []time.Duration, p int) time.Duration { return d[len(d)*p/100].Round(10 * time.Microsecond) }
		t.Logf("%s: grant event delivered %s (median) / %s (p99) after the acquire was sent, %s / %s after its answer arrived (%d acquires)",
			backend, pct(fromRequest, 50), pct(fromRequest, 99), pct(fromAnswer, 50), pct(fromAnswer, 99), n)
		if p := pct(fromRequest, 99); p > time.Second {
			t.Errorf("p99 of the delivery delay %s, over a second", p)
		}
	})
}
