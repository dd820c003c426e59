package service

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// The numbered events of GET /v1/events (NumberEvents). Each
// transaction gives its events the next ids of a counter kept in the service
// row, written back in the same transaction: ids increase by one per event
// in commit order and keep increasing across restarts. On a database with
// peers every transaction holds the service row's lock while it numbers its
// events and until it commits, so the counter is one sequence for all the
// servers, in commit order, and every event is published (publish) for
// every server's Listen, which passes them to OnEvents's function, its own
// server's included: PostgreSQL delivers the notifications of transactions
// in the order they committed.

// numberEvents gives the events of the operation from index from on the
// next ids.
func (s *Service) numberEvents(from int) {
	for i := from; i < len(s.events); i++ {
		s.c.EventID++
		s.events[i].ID = s.c.EventID
	}
}

// rowChanged reports whether the service row must be written at the end
// of the operation for what c holds besides the clock: the event counter,
// and on a database with peers everything. There a counter that alone
// moved is written by publish's first notification instead, in the same
// statement (repo.NotifyEventID): a round trip less while every server
// waits for the service row's lock.
func (s *Service) rowChanged(start repo.Counters) bool {
	if !s.peers {
		return s.c.EventID != start.EventID
	}
	c := s.c
	if s.eventIDs {
		c.EventID = start.EventID
	}
	return c != start
}

// notify sends one notification of publish; the first of a transaction
// with numbered events also writes the event counter.
func (s *Service) notify(tx *repo.Tx, payload string, counterWritten *bool) error {
	if s.eventIDs && !*counterWritten {
		*counterWritten = true
		return repo.NotifyEventID(tx, payload, s.c.EventID)
	}
	return repo.Notify(tx, payload)
}

// peerKind reports whether the servers' wake-ups and lapse timers need
// events of kind k from the other servers (Listen): a grant, abort or
// withdrawal answers a blocked acquire; a renew may move a lapse timer.
func peerKind(k EventKind) bool {
	switch k {
	case EventGranted, EventAborted, EventWithdrawn, EventRenewed:
		return true
	}
	return false
}

func toWire(e Event) wireEvent {
	return wireEvent{ID: e.ID, Kind: e.Kind, Client: e.Client, Lock: e.Lock, At: e.At,
		Token: e.Token, ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue, Position: e.Position,
		Mode: e.Mode, Cycle: e.Cycle, Requester: e.Requester, Lost: e.Lost, Highest: e.Highest, By: e.By,
		Predecessors: e.Predecessors, Abort: e.Abort, Truncated: e.Truncated}
}

func fromWire(w wireEvent) Event {
	return Event{ID: w.ID, Kind: w.Kind, Client: w.Client, Lock: w.Lock, At: w.At,
		Token: w.Token, ExpiresAt: w.ExpiresAt, FromQueue: w.FromQueue, Position: w.Position,
		Mode: w.Mode, Cycle: w.Cycle, Requester: w.Requester, Lost: w.Lost, Highest: w.Highest, By: w.By,
		Predecessors: w.Predecessors, Abort: w.Abort, Truncated: w.Truncated}
}

// EventCursor returns the id of the last event committed, read on a
// connection apart from the writer's.
func (s *Service) EventCursor(ctx context.Context) (int64, error) {
	var id int64
	err := s.db.Read(ctx, func(tx *repo.Tx) error {
		c, err := repo.ServiceCounters(tx)
		id = c.EventID
		return err
	})
	return id, err
}

// OnEvents sets the function that, on a database with peers, receives the
// numbered events of every committed transaction of every server on the
// database (this one's included), in commit order, from Listen's
// notifications: call it before Listen. fn is called with resync set, and
// no events, each time events may have been missed: when Listen starts
// listening, first and after a lost connection, and when an event was too
// large for a notification. cursor is then the id of the last event
// committed before the events that follow (-1 when it could not be read);
// later events with an id at or below it are repeats to skip. On a
// database without peers the OnCommit function has all the events.
func (s *Service) OnEvents(fn func(events []Event, resync bool, cursor int64)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventSink = fn
}

// eventsResync tells sink that Listen (re)started listening.
func (s *Service) eventsResync(ctx context.Context, sink func([]Event, bool, int64)) {
	if sink == nil {
		return
	}
	id, err := s.EventCursor(ctx)
	if err != nil {
		id = -1
	}
	sink(nil, true, id)
}

// eventsHeard passes sink the numbered events of a notification.
func (s *Service) eventsHeard(n notice, sink func([]Event, bool, int64)) {
	if sink == nil {
		return
	}
	if len(n.Events) > 0 {
		events := make([]Event, 0, len(n.Events))
		for _, w := range n.Events {
			if w.ID != 0 { // a server that numbers no events (an older one) sent it
				events = append(events, fromWire(w))
			}
		}
		if len(events) > 0 {
			sink(events, false, 0)
		}
	}
	if n.Skipped {
		cursor := n.Cursor
		if cursor <= 0 { // an older server's notice
			cursor = -1
		}
		sink(nil, true, cursor)
	}
}

// eventKinds maps the service's event kinds to the API's.
var eventKinds = map[EventKind]lk.EventKind{
	EventGranted:    lk.EventGrant,
	EventRenewed:    lk.EventRenew,
	EventReleased:   lk.EventRelease,
	EventLapsed:     lk.EventLapse,
	EventRevoked:    lk.EventRevoke,
	EventWithdrawn:  lk.EventWithdraw,
	EventQueued:     lk.EventQueue,
	EventAborted:    lk.EventDeadlockAbort,
	EventStaleWrite: lk.EventStaleWrite,
	EventUnfenced:   lk.EventUnfence,
}

// API returns the event as GET /v1/events shows it to a reader that sees
// every client id.
func (e Event) API() lk.Event {
	out := lk.Event{ID: e.ID, Kind: eventKinds[e.Kind], At: e.At, Lock: e.Lock, Token: e.Token,
		ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue, Position: e.Position, Lost: e.Lost, Highest: e.Highest,
		Predecessors: e.Predecessors, Abort: e.Abort, Truncated: e.Truncated}
	if e.Client != "" {
		out.Client = &e.Client
	}
	if e.Requester != "" {
		out.Requester = &e.Requester
	}
	switch e.Kind {
	case EventGranted, EventLapsed, EventReleased, EventRevoked, EventWithdrawn, EventAborted, EventQueued, EventRenewed:
		out.Mode = e.Mode
	}
	switch e.Kind {
	case EventLapsed, EventReleased, EventRevoked, EventQueued, EventWithdrawn, EventAborted:
		out.ExpiresAt = 0 // only grant and renew carry it
	}
	return out
}

// LastEventID returns the id of the last event this service numbered, or
// read from the service row when it last began a transaction: on a database
// without peers, the last event committed.
func (s *Service) LastEventID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.EventID
}

// NumberEvents makes every later transaction number its events (Event.ID)
// with the counter kept in the service row, and on a database with peers
// publish every event for OnEvents: what GET /v1/events needs, which
// a server turns on. Without it, transactions write and send nothing more
// (leasekeeper run).
func (s *Service) NumberEvents() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventIDs = true
}
