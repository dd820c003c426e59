package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// sseEvent is one event of a GET /v1/events stream as sent.
type sseEvent struct {
	id    string // "" when the event had no id line
	event string
	data  string
}

// decoded is the event's data line as an lk.Event.
func (e sseEvent) decoded(t *testing.T) lk.Event {
	t.Helper()
	var ev lk.Event
	if err := json.Unmarshal([]byte(e.data), &ev); err != nil {
		t.Fatalf("data line %q: %v", e.data, err)
	}
	return ev
}

// sseStream reads a GET /v1/events stream.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
	done   chan struct{} // closed when the stream ended
	cancel context.CancelFunc
}

// openEvents opens GET url+"/v1/events"+query with the given headers; it
// fails the test unless the answer is 200 text/event-stream.
func openEvents(t *testing.T, base, query string, header map[string]string) *sseStream {
	t.Helper()
	st, status := tryEvents(t, base, query, header)
	if status != http.StatusOK {
		t.Fatalf("GET /v1/events%s: HTTP %d", query, status)
	}
	return st
}

func tryEvents(t *testing.T, base, query string, header map[string]string) (*sseStream, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	st := &sseStream{t: t, resp: resp, events: make(chan sseEvent, 100000), done: make(chan struct{}), cancel: cancel}
	go st.read()
	t.Cleanup(st.close)
	return st, resp.StatusCode
}

func (st *sseStream) read() {
	defer close(st.done)
	sc := bufio.NewScanner(st.resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var e sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if e.event != "" || e.data != "" {
				st.events <- e
			}
			e = sseEvent{}
		case strings.HasPrefix(line, ":"): // a comment: keep-alive
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if e.data != "" {
				st.t.Errorf("two data lines in one event: %q", line)
			}
			e.data = strings.TrimPrefix(line, "data: ")
		default:
			st.t.Errorf("unexpected line in the stream: %q", line)
		}
	}
}

func (st *sseStream) close() {
	st.cancel()
	st.resp.Body.Close()
	<-st.done
}

// next returns the next event, failing the test after wait.
func (st *sseStream) next(wait time.Duration) sseEvent {
	st.t.Helper()
	select {
	case e := <-st.events:
		return e
	case <-time.After(wait):
		st.t.Fatalf("no event within %s", wait)
		return sseEvent{}
	}
}

// quiet reads events until none comes for wait.
func (st *sseStream) quiet(wait time.Duration) []sseEvent {
	var out []sseEvent
	for {
		select {
		case e := <-st.events:
			out = append(out, e)
		case <-time.After(wait):
			return out
		}
	}
}

// until reads events up to the one with id (inclusive).
func (st *sseStream) until(id int64, wait time.Duration) []sseEvent {
	st.t.Helper()
	var out []sseEvent
	for {
		e := st.next(wait)
		out = append(out, e)
		if e.id == strconv.FormatInt(id, 10) {
			return out
		}
	}
}

// kinds sums up events as "id:kind:client:lock".
func kinds(t *testing.T, events []sseEvent) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		d := e.decoded(t)
		c := "-"
		if d.Client != nil {
			c = *d.Client
		}
		if e.id != strconv.FormatInt(d.ID, 10) && e.id != "" {
			t.Errorf("id line %q, data id %d", e.id, d.ID)
		}
		if string(d.Kind) != e.event {
			t.Errorf("event line %q, data kind %q", e.event, d.Kind)
		}
		out = append(out, fmt.Sprintf("%d:%s:%s:%s", d.ID, e.event, c, d.Lock))
	}
	return out
}

func expectKinds(t *testing.T, got []sseEvent, want ...string) {
	t.Helper()
	k := kinds(t, got)
	if strings.Join(k, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n got %v\nwant %v", k, want)
	}
}

// TestEventsFormat: every event has an id, an event line with its kind and
// a data line whose first seven fields are always there, null where the
// kind has none, in commit order; a grant from the queue carries its
// predecessor.
func TestEventsFormat(t *testing.T) {
	f := startExplaining(t, 1000)
	st := openEvents(t, f.url, "", nil)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 30, "mode": "shared"})
	f.clock.Set(time.Unix(1004, 0))
	f.call("POST", "/v1/release", map[string]any{"client": "a", "lock": "L"})
	f.call("POST", "/v1/renew", map[string]any{"client": "b", "lock": "L", "ttl": 60})
	f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "v", "token": 2})
	f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "v", "token": 1})
	got := st.until(6, 5*time.Second)
	expectKinds(t, got, "1:grant:a:L", "2:queue:b:L", "3:release:a:L", "4:grant:b:L", "5:renew:b:L", "6:stale_write:-:L")
	want := []string{
		`{"id":1,"kind":"grant","at":1000,"lock":"L","client":"a","token":1,"mode":"exclusive","expires_at":1010}`,
		`{"id":2,"kind":"queue","at":1000,"lock":"L","client":"b","token":null,"mode":"shared","position":1}`,
		`{"id":3,"kind":"release","at":1004,"lock":"L","client":"a","token":1,"mode":"exclusive"}`,
		`{"id":4,"kind":"grant","at":1004,"lock":"L","client":"b","token":2,"mode":"shared","expires_at":1034,"from_queue":true,` +
			`"predecessors":[{"client":"a","token":1,"mode":"exclusive","ended":"released","ended_at":1004}],"position":1}`,
		`{"id":5,"kind":"renew","at":1004,"lock":"L","client":"b","token":2,"mode":null,"expires_at":1064}`,
		`{"id":6,"kind":"stale_write","at":1004,"lock":"L","client":null,"token":1,"mode":null,"highest":2}`,
	}
	for i, e := range got {
		if i < len(want) && e.data != want[i] {
			t.Errorf("event %d:\n got %s\nwant %s", i+1, e.data, want[i])
		}
	}
	// A decoded event reused for another keeps nothing of the first.
	ev := got[3].decoded(t)
	if err := json.Unmarshal([]byte(got[4].data), &ev); err != nil || ev.Predecessors != nil || ev.FromQueue {
		t.Errorf("an Event decoded over another kept its fields: %+v (%v)", ev, err)
	}
	if b, _ := json.Marshal(ev); string(b) != got[4].data {
		t.Errorf("an Event round trip: %s, want %s", b, got[4].data)
	}
}

// TestEventsFilters: lock is exact, prefix matches the start of the lock's
// name, client the event's client; they combine; a bad one is refused.
func TestEventsFilters(t *testing.T) {
	f := start(t, 1000)
	streams := map[string]*sseStream{}
	for _, q := range []string{"?lock=a/1", "?prefix=a/", "?client=y", "?prefix=a/&client=y", "?lock=a"} {
		streams[q] = openEvents(t, f.url, q, nil)
	}
	all := openEvents(t, f.url, "", nil)
	for _, op := range []struct{ client, lock string }{{"x", "a/1"}, {"y", "a/2"}, {"x", "b"}, {"y", "b"}, {"x", "a"}, {"z", "a/1"}} {
		f.call("POST", "/v1/acquire", map[string]any{"client": op.client, "lock": op.lock, "ttl": 10})
	}
	expectKinds(t, all.until(6, 5*time.Second),
		"1:grant:x:a/1", "2:grant:y:a/2", "3:grant:x:b", "4:queue:y:b", "5:grant:x:a", "6:queue:z:a/1")
	// Each stream is read up to the last event it should have, however
	// late (a busy machine, -race), then until it is quiet, so that an
	// event it should not have shows too.
	for q, want := range map[string][]string{
		"?lock=a/1":           {"1:grant:x:a/1", "6:queue:z:a/1"},
		"?prefix=a/":          {"1:grant:x:a/1", "2:grant:y:a/2", "6:queue:z:a/1"},
		"?client=y":           {"2:grant:y:a/2", "4:queue:y:b"},
		"?prefix=a/&client=y": {"2:grant:y:a/2"},
		"?lock=a":             {"5:grant:x:a"},
	} {
		last, _ := strconv.ParseInt(strings.SplitN(want[len(want)-1], ":", 2)[0], 10, 64)
		got := append(streams[q].until(last, 5*time.Second), streams[q].quiet(300*time.Millisecond)...)
		t.Run(q, func(t *testing.T) { expectKinds(t, got, want...) })
	}
	for _, q := range []string{"?lock=", "?prefix=", "?client=", "?last_event_id=x", "?last_event_id=-1"} {
		status, v := f.call("GET", "/v1/events"+q, nil)
		expectError(t, status, v, lk.CodeInvalidArguments)
	}
	if _, status := tryEvents(t, f.url, "", map[string]string{"Last-Event-ID": "nope"}); status != http.StatusBadRequest {
		t.Errorf("Last-Event-ID nope: HTTP %d, want 400", status)
	}
}

// TestEventsResume: a reader that comes back with Last-Event-ID (or
// ?last_event_id=) gets exactly the events after it, then live ones.
func TestEventsResume(t *testing.T) {
	f := start(t, 1000)
	for i := range 5 {
		f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": fmt.Sprint("L", i), "ttl": 10})
	}
	st := openEvents(t, f.url, "", map[string]string{"Last-Event-ID": "2"})
	expectKinds(t, st.until(5, 5*time.Second), "3:grant:c:L2", "4:grant:c:L3", "5:grant:c:L4")
	f.call("POST", "/v1/release", map[string]any{"client": "c", "lock": "L0"})
	expectKinds(t, []sseEvent{st.next(5 * time.Second)}, "6:release:c:L0")

	// The query, for tools that cannot set a header; the header wins.
	q := openEvents(t, f.url, "?last_event_id=4", nil)
	expectKinds(t, q.until(6, 5*time.Second), "5:grant:c:L4", "6:release:c:L0")
	h := openEvents(t, f.url, "?last_event_id=1", map[string]string{"Last-Event-ID": "5"})
	expectKinds(t, h.until(6, 5*time.Second), "6:release:c:L0")
	// Up to date: nothing until the next event.
	u := openEvents(t, f.url, "?last_event_id=6", nil)
	f.call("POST", "/v1/release", map[string]any{"client": "c", "lock": "L1"})
	expectKinds(t, []sseEvent{u.next(5 * time.Second)}, "7:release:c:L1")
}

// TestEventsReset: a reader resuming from an id older than the buffer, or
// from an id the server never gave, gets one reset (carrying the id to
// resume from) and then live events only.
func TestEventsReset(t *testing.T) {
	f := startWith(t, filepath.Join(t.TempDir(), "r.db"), engine.NewManualClock(time.Unix(1000, 0)), engine.Options{EventsBuffer: 3})
	for i := range 6 {
		f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": fmt.Sprint("L", i), "ttl": 10})
	}
	// The buffer holds 4, 5 and 6: resuming from 3 is still exact.
	ok := openEvents(t, f.url, "", map[string]string{"Last-Event-ID": "3"})
	expectKinds(t, ok.until(6, 5*time.Second), "4:grant:c:L3", "5:grant:c:L4", "6:grant:c:L5")
	for _, from := range []string{"2", "0", "7", "1000"} {
		st := openEvents(t, f.url, "", map[string]string{"Last-Event-ID": from})
		first := st.next(5 * time.Second)
		if first.event != "reset" || first.id != "6" {
			t.Errorf("resuming from %s: first event %+v, want a reset with id 6", from, first)
		}
		expectKinds(t, []sseEvent{first}, "6:reset:-:")
		if more := st.quiet(200 * time.Millisecond); len(more) > 0 {
			t.Errorf("resuming from %s: after the reset %v, want nothing until a new event", from, kinds(t, more))
		}
		defer func(st *sseStream) {
			expectKinds(t, []sseEvent{st.next(5 * time.Second)}, "7:release:c:L0")
		}(st)
	}
	f.call("POST", "/v1/release", map[string]any{"client": "c", "lock": "L0"})
}

// TestEventsRestart: ids keep increasing across a restart; a reader
// resuming from the last id before it misses nothing, one from an earlier
// id gets a reset.
func TestEventsRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "restart.db")
	f := startOn(t, path, 1000)
	st := openEvents(t, f.url, "", nil)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	f.call("POST", "/v1/release", map[string]any{"client": "a", "lock": "L"})
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "M", "ttl": 10})
	expectKinds(t, st.until(3, 5*time.Second), "1:grant:a:L", "2:release:a:L", "3:grant:a:M")
	st.close()
	f.stop()

	g := startOn(t, path, 1100)
	resumed := openEvents(t, g.url, "", map[string]string{"Last-Event-ID": "3"})
	early := openEvents(t, g.url, "", map[string]string{"Last-Event-ID": "2"})
	// M lapsed at 1010; the restarted server notices on its first operation.
	g.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 10})
	expectKinds(t, resumed.until(5, 5*time.Second), "4:lapse:a:M", "5:grant:b:L")
	// The reset names where its reader stands: the last event when it
	// connected, which the lapse timer may already have made 4.
	got := early.until(5, 5*time.Second)
	if r := got[0]; r.event != "reset" || (r.id != "3" && r.id != "4") {
		t.Fatalf("resuming from 2 after a restart: first %+v, want a reset", r)
	}
	want := []string{"3:reset:-:", "4:lapse:a:M", "5:grant:b:L"}
	if got[0].id == "4" {
		want = []string{"4:reset:-:", "5:grant:b:L"}
	}
	expectKinds(t, got, want...)
}

// TestEventsDrain: a stream ends when the server drains, so that a
// graceful stop does not wait for readers.
func TestEventsDrain(t *testing.T) {
	f := start(t, 1000)
	st := openEvents(t, f.url, "", nil)
	go f.stop()
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open 10 s after the server began to stop")
	}
}

// TestEventsKeepAlive: a quiet stream gets comment lines.
func TestEventsKeepAlive(t *testing.T) {
	f := startService(t, filepath.Join(t.TempDir(), "k.db"), engine.Options{Clock: engine.NewManualClock(time.Unix(1000, 0))},
		server.Options{EventsKeepAlive: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != ": keep-alive\n" {
		t.Fatalf("first line %q (%v), want a keep-alive comment", line, err)
	}
}

// concurrently runs n goroutines of fn(i).
func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

// startExplaining starts a server whose answers and events say why
// (service.Config.Explain, as serve has it).
func startExplaining(t *testing.T, at int64) *fixture {
	t.Helper()
	return startService(t, filepath.Join(t.TempDir(), "x.db"),
		engine.Options{Rules: service.Config{Explain: true}, Clock: engine.NewManualClock(time.Unix(at, 0))}, server.Options{})
}
