package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// GET /v1/events: the engine's event bus (engine.Bus) as Server-Sent
// Events (docs/api.md, "Events"). A stream filters and redacts what its
// reader may see, and writes it out; a reader that takes nothing for
// eventsWriteTimeout is cut off.

// DefaultEventsKeepAlive is how often a quiet stream gets a comment line,
// so that proxies and load balancers keep it open.
const DefaultEventsKeepAlive = 15 * time.Second

// DefaultMaxStreams bounds the event streams open at once on a server
// (serve --max-streams): each holds a connection and a socket's buffers.
const DefaultMaxStreams = 1000

// streamSendBuffer is the socket send buffer of an event stream's
// connection. Linux would otherwise grow it up to tcp_wmem's maximum (4 MB
// on many hosts) for a reader that does not read, in kernel memory that the
// server does not see; events are small, and a reader that keeps up needs
// little room. (The kernel doubles it, for its own bookkeeping.)
const streamSendBuffer = 32 << 10

// eventsRequest is GET /v1/events's query.
type eventsRequest struct {
	filter lk.EventFilter
	last   int64 // the id to resume after; -1 for none
}

func (eventsRequest) Validate() error { return nil }

func decodeEvents(f *fields) eventsRequest {
	q := eventsRequest{last: -1}
	for _, p := range []struct {
		key string
		to  *string
	}{{"lock", &q.filter.Lock}, {"prefix", &q.filter.Prefix}, {"client", &q.filter.Client}} {
		if _, ok := f.get(p.key); ok {
			if *p.to = f.name(p.key); *p.to == "" {
				f.fail(lk.CodeInvalidArguments, p.key+" must not be empty: leave it out to match all")
			}
		}
	}
	if _, ok := f.get("last_event_id"); ok {
		q.last = f.integer("last_event_id", false, -1)
		if q.last < 0 {
			f.fail(lk.CodeInvalidArguments, "last_event_id must be an event's id, at least 0")
		}
	}
	return q
}

// handleEvents serves GET /v1/events. A client principal sees only the
// events of its own client ids, and in those, the other client ids it may
// not act as are null; asking for another client's events is refused.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q, ok := decodeRequest(w, r, query, decodeEvents)
	if !ok {
		return
	}
	// The header is what a browser's EventSource sends when it
	// reconnects: it wins over the query a page was first opened with.
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id < 0 {
			refuse(w, lk.Errorf(lk.CodeInvalidArguments, "Last-Event-ID must be an event's id, at least 0"))
			return
		}
		q.last = id
	}
	acc := Access{Op: "events", Client: q.filter.Client}
	if !s.allowed(w, r, acc) {
		return
	}
	if n := s.streams.Add(1); n > int64(s.maxStreams) {
		s.streams.Add(-1)
		s.deny(w, r, acc, &Denial{Code: lk.CodeRateLimited, RetryAfter: time.Second,
			Message: fmt.Sprintf("the server has %d event streams open, its --max-streams; retry later, or on another server", s.maxStreams)})
		return
	}
	defer s.streams.Add(-1)
	if sa, ok := s.auth.(StreamAdmitter); ok {
		release, d := sa.AdmitStream(r, acc)
		if d != nil {
			s.deny(w, r, acc, d)
			return
		}
		defer release()
	}
	if conn, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		if tc := tcpConn(conn); tc != nil {
			tc.SetWriteBuffer(streamSendBuffer)
		}
	}
	var scope func(string) bool
	if cs, ok := s.auth.(ClientScoper); ok {
		scope = cs.ClientScope(r)
	}
	st := &stream{s: s, w: w, rc: http.NewResponseController(w), filter: q.filter, scope: scope}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on at once
	w.WriteHeader(http.StatusOK)
	st.run(r.Context(), q.last)
}

// stream is one reader of /v1/events.
type stream struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	filter lk.EventFilter
	scope  func(string) bool // nil: sees every client id
	buf    bytes.Buffer
}

// run sends events after the id last (-1: from now on) until the reader
// leaves, the engine drains, or the reader falls behind the ring.
func (st *stream) run(ctx context.Context, last int64) {
	f, reset := st.s.eng.Events().Follow(last)
	if reset {
		// Older than the ring, from before events were lost, or from
		// another database: the reader must read the state again; then
		// live events.
		st.control(f, lk.EventReset)
	}
	if !st.flush() {
		return
	}
	keepAlive := time.NewTicker(st.s.keepAlive)
	defer keepAlive.Stop()
	closed := st.s.eng.Events().Closed()
	for {
		events, control, changed := f.Read()
		if control != "" {
			st.control(f, control)
			if !st.flush() || control == lk.EventOverflow {
				return
			}
			continue
		}
		if len(events) > 0 {
			for _, e := range events {
				if e, ok := st.shows(e); ok {
					st.send(e, true)
				}
			}
			if !st.flush() {
				return
			}
			continue
		}
		select {
		case <-changed:
		case <-keepAlive.C:
			st.buf.WriteString(": keep-alive\n\n")
			if !st.flush() {
				return
			}
		case <-ctx.Done():
			return
		case <-closed:
			return
		}
	}
}

// control writes a reset or an overflow; its id is the reader's place,
// left out when unknown.
func (st *stream) control(f *engine.Follower, kind lk.EventKind) {
	st.send(f.Control(kind), f.Cursor() >= 0)
}

// shows reports whether the reader's filter and scope take e, and returns
// it as the reader may see it.
func (st *stream) shows(e lk.Event) (lk.Event, bool) {
	f := st.filter
	if f.Lock != "" && e.Lock != f.Lock && !lostLock(e, func(l string) bool { return l == f.Lock }) {
		return e, false
	}
	if f.Prefix != "" && !strings.HasPrefix(e.Lock, f.Prefix) && !lostLock(e, func(l string) bool { return strings.HasPrefix(l, f.Prefix) }) {
		return e, false
	}
	if f.Client != "" && (e.Client == nil || *e.Client != f.Client) {
		return e, false
	}
	if st.scope == nil {
		return e, true
	}
	if e.Client == nil || !st.scope(*e.Client) {
		return e, false
	}
	return redact(e, st.scope), true
}

// lostLock reports whether e is a deadlock abort whose victim lost a lease
// on a lock that match takes: a reader watching that lock sees its holder
// go.
func lostLock(e lk.Event, match func(string) bool) bool {
	return e.Kind == lk.EventDeadlockAbort && slices.ContainsFunc(e.Lost, func(h lk.Holder) bool { return match(h.Lock) })
}

// redact hides the client ids that scope does not take, on a copy: the
// ring's event is every reader's.
func redact(e lk.Event, scope func(string) bool) lk.Event {
	hide := func(c *string) *string {
		if c == nil || !scope(*c) {
			return nil
		}
		return c
	}
	e.Requester = hide(e.Requester)
	if e.Predecessors != nil {
		ps := slices.Clone(e.Predecessors)
		for i := range ps {
			ps[i].Client = hide(ps[i].Client)
		}
		e.Predecessors = ps
	}
	if e.Abort != nil {
		a := *e.Abort
		a.Victim = hide(a.Victim)
		a.Cycle = slices.Clone(a.Cycle)
		for i := range a.Cycle {
			a.Cycle[i].Client = hide(a.Cycle[i].Client)
		}
		e.Abort = &a
	}
	return e
}

// send writes one event into the stream's buffer; withID false leaves out
// the id line (a reset while the ids are not known).
func (st *stream) send(e lk.Event, withID bool) {
	data, err := json.Marshal(e)
	if err != nil {
		st.s.log.Error("encoding an event", "err", err)
		return
	}
	if withID {
		st.buf.WriteString("id: ")
		st.buf.WriteString(strconv.FormatInt(e.ID, 10))
		st.buf.WriteByte('\n')
	}
	st.buf.WriteString("event: ")
	st.buf.WriteString(string(e.Kind))
	st.buf.WriteString("\ndata: ")
	st.buf.Write(data)
	st.buf.WriteString("\n\n")
}

// eventsWriteTimeout bounds each write of a stream: a reader that takes
// nothing for this long has left, or stalls, and its connection is closed.
const eventsWriteTimeout = 30 * time.Second

// flush writes the buffer out to the reader, now.
func (st *stream) flush() bool {
	st.rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
	if st.buf.Len() > 0 {
		if _, err := st.w.Write(st.buf.Bytes()); err != nil {
			return false
		}
		st.buf.Reset()
	}
	return st.rc.Flush() == nil
}
