package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// GET /v1/events: the service's events as Server-Sent Events (docs/api.md,
// "Events").
//
// Every event goes into one ring, the hub, in id order; each stream keeps
// its place in the ring and copies out what it has not sent yet. The
// committer (SQLite: the OnCommit function) or the listener (PostgreSQL:
// the notifications of every server, this one's included, in commit order)
// only appends and wakes the streams, whatever their number and speed, so a
// slow reader never slows it. A stream that falls behind by more than the
// ring holds gets "overflow" and is ended; one that resumes from an id the
// ring no longer holds, or whose events were lost (a gap in the ids, a lost
// notification connection), gets "reset".

// DefaultEventsBuffer is how many recent events a server keeps for streams
// to catch up and readers to resume from (serve --events-buffer).
const DefaultEventsBuffer = 10000

// DefaultEventsKeepAlive is how often a quiet stream gets a comment line,
// so that proxies and load balancers keep it open.
const DefaultEventsKeepAlive = 15 * time.Second

// eventsBatch bounds what a stream copies out of the ring at once.
const eventsBatch = 256

// hub is the ring of recent events.
type hub struct {
	mu   sync.Mutex
	ring []lk.Event // the event with id i is at i % len(ring)
	// The ring holds every event with an id in (floor, last]; known is
	// false while the ids are unknown (after events were lost, on
	// PostgreSQL, until the listener reads the counter again).
	floor, last int64
	known       bool
	// epoch counts resets: a stream from an earlier epoch sends "reset".
	epoch uint64
	// changed is closed, and replaced, at every change.
	changed chan struct{}
}

func newHub(size int) *hub {
	if size <= 0 {
		size = DefaultEventsBuffer
	}
	return &hub{ring: make([]lk.Event, size), changed: make(chan struct{})}
}

func (h *hub) signal() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// reset empties the ring: the events up to cursor are the past that
// readers must read afresh (-1: not known yet).
func (h *hub) reset(cursor int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resetLocked(cursor)
	h.signal()
}

func (h *hub) resetLocked(cursor int64) {
	h.epoch++
	h.floor, h.last, h.known = cursor, cursor, cursor >= 0
}

// resync is the listener's news that events may have been missed, cursor
// being the last committed id (-1 when unknown): when the ring already
// ends there, nothing was.
func (h *hub) resync(cursor int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cursor >= 0 && h.known && cursor == h.last {
		return
	}
	h.resetLocked(cursor)
	h.signal()
}

// add appends events in id order. A repeat (an id already in) is skipped;
// a gap (an id beyond the next) means events were lost: a reset.
func (h *hub) add(events []service.Event) {
	if len(events) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, se := range events {
		e := se.API()
		switch {
		case !h.known:
			// The first event after a loss: the ring starts here;
			// readers were told when the loss was.
			h.floor, h.last, h.known = e.ID-1, e.ID-1, true
		case e.ID <= h.last:
			continue
		case e.ID != h.last+1:
			h.resetLocked(e.ID - 1)
		}
		h.ring[e.ID%int64(len(h.ring))] = e
		h.last = e.ID
		if h.last-h.floor > int64(len(h.ring)) {
			h.floor = h.last - int64(len(h.ring))
		}
	}
	h.signal()
}

// startEvents sets up the hub; on a database with peers its events come
// from the notifications of every server (OnEvents, through the listener
// that listenLoop runs), elsewhere from this server's commits (dispatch).
func (s *Server) startEvents(opts Options) {
	s.svc.NumberEvents()
	s.hub = newHub(opts.EventsBuffer)
	s.keepAlive = opts.EventsKeepAlive
	if s.keepAlive <= 0 {
		s.keepAlive = DefaultEventsKeepAlive
	}
	if !s.svc.HasPeers() {
		s.hub.reset(s.svc.LastEventID())
		return
	}
	s.hub.reset(-1)
	s.svc.OnEvents(func(events []service.Event, resync bool, cursor int64) {
		if resync {
			s.hub.resync(cursor)
		}
		s.hub.add(events)
	})
}

// commitEvents is the hub's part of the OnCommit function: on a database
// without peers the commits of this server are all there is.
func (s *Server) commitEvents(events []service.Event) {
	if !s.svc.HasPeers() {
		s.hub.add(events)
	}
}

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
	if !s.allowed(w, r, Access{Op: "events", Client: q.filter.Client}) {
		return
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
// leaves, the server drains, or the reader falls behind the ring.
func (st *stream) run(ctx context.Context, last int64) {
	h := st.s.hub
	h.mu.Lock()
	epoch, cursor, known := h.epoch, h.last, h.known
	if !known {
		cursor = -1 // taken from the ring once known
	}
	resume := last < 0 || known && last >= h.floor && last <= h.last
	if last >= 0 && resume {
		cursor = last
	}
	h.mu.Unlock()
	if !resume {
		// Older than the ring, from before events were lost, or from
		// another database: the reader must read the state again; then
		// live events.
		st.control(lk.EventReset, cursor)
	}
	if !st.flush() {
		return
	}
	keepAlive := time.NewTicker(st.s.keepAlive)
	defer keepAlive.Stop()
	batch := make([]lk.Event, 0, eventsBatch)
	for {
		var control lk.EventKind
		batch = batch[:0]
		h.mu.Lock()
		switch {
		case epoch != h.epoch:
			// Events were lost: what came after the loss is in the
			// ring, from its start.
			control, epoch, cursor = lk.EventReset, h.epoch, h.floor
			if !h.known {
				cursor = -1
			}
		case cursor < 0 && h.known:
			cursor = h.floor
		case h.known && cursor < h.floor:
			control = lk.EventOverflow
		}
		if control == "" && h.known {
			for id := cursor + 1; id <= h.last && len(batch) < eventsBatch; id++ {
				batch = append(batch, h.ring[id%int64(len(h.ring))])
			}
		}
		changed := h.changed
		h.mu.Unlock()
		if control != "" {
			st.control(control, cursor)
			if !st.flush() || control == lk.EventOverflow {
				return
			}
			continue
		}
		if len(batch) > 0 {
			for _, e := range batch {
				cursor = e.ID
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
		case <-st.s.draining:
			return
		case <-st.s.ctx.Done():
			return
		}
	}
}

// control writes a reset or an overflow; its id is cursor, the reader's
// place, left out when unknown (-1).
func (st *stream) control(kind lk.EventKind, cursor int64) {
	st.send(lk.Event{ID: max(cursor, 0), Kind: kind, At: st.s.now().Unix()}, cursor >= 0)
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
	return e.Kind == lk.EventDeadlockAbort && slices.ContainsFunc(e.Lost, func(h lk.Hold) bool { return match(h.Lock) })
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
