package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// Several servers on one PostgreSQL database: each transaction tells the
// others what it did, through notifications sent in the transaction (so
// delivered only if it commits, and after it commits, in commit order), and
// each server listens for them all, its own included (listen).

// maxPayload bounds a notification's payload: PostgreSQL refuses 8000 bytes
// or more.
const maxPayload = 7900

// peerLink is a server's side of the notifications.
type peerLink struct {
	origin string // tells this process's notifications from the others'
}

func newPeerLink() *peerLink {
	var b [8]byte
	rand.Read(b[:])
	return &peerLink{origin: hex.EncodeToString(b[:])}
}

// notice is the notification payload: who sent it and what happened, or
// (Recheck) that something happened too large to tell in a notification.
type notice struct {
	Origin  string      `json:"o"`
	Events  []wireEvent `json:"e,omitempty"`
	Recheck bool        `json:"r,omitempty"`
	// Skipped: a numbered event was too large to send.
	Skipped bool `json:"s,omitempty"`
	// Cursor, with Skipped: the transaction's last event id, where the
	// readers who missed its events stand.
	Cursor int64 `json:"u,omitempty"`
}

// wireEvent is a service.Event as a notification carries it: whom to wake
// and with what, when the new lease ends (for the lapse timers), and the
// rest for GET /v1/events.
type wireEvent struct {
	Kind      wireKind `json:"k"`
	Client    string   `json:"c"`
	Lock      string   `json:"l"`
	At        int64    `json:"a,omitempty"`
	Token     int64    `json:"t,omitempty"`
	ExpiresAt int64    `json:"x,omitempty"`
	FromQueue bool     `json:"q,omitempty"`
	Position  int64    `json:"p,omitempty"`

	ID           int64            `json:"i,omitempty"`
	Mode         lk.Mode          `json:"m,omitempty"`
	Cycle        []string         `json:"y,omitempty"`
	Requester    string           `json:"rq,omitempty"`
	Lost         []lk.Holder      `json:"h,omitempty"`
	Highest      int64            `json:"g,omitempty"`
	By           string           `json:"b,omitempty"`
	Resource     string           `json:"rs,omitempty"`
	Predecessors []lk.Predecessor `json:"d,omitempty"`
	Abort        *lk.Abort        `json:"ab,omitempty"`
	Truncated    bool             `json:"tr,omitempty"`
}

// wireKind is an event's kind in a notification: a number, fixed for good,
// so that servers of two versions, during a rolling upgrade, read each
// other's wake-ups. It is an encoding of lk.EventKind, not a second enum.
type wireKind int

var wireKinds = []lk.EventKind{1: lk.EventGrant, 2: lk.EventDeadlockAbort, 3: lk.EventWithdraw, 4: lk.EventRevoke,
	5: lk.EventLapse, 6: lk.EventRelease, 7: lk.EventRenew, 8: lk.EventStaleWrite, 9: lk.EventQueue, 10: lk.EventUnfence,
	11: lk.EventFenceStale}

func toWireKind(k lk.EventKind) wireKind {
	for i, w := range wireKinds {
		if w == k && k != "" {
			return wireKind(i)
		}
	}
	return 0
}

func (k wireKind) kind() lk.EventKind {
	if k > 0 && int(k) < len(wireKinds) {
		return wireKinds[k]
	}
	return ""
}

func toWire(e service.Event) wireEvent {
	return wireEvent{ID: e.ID, Kind: toWireKind(e.Kind), Client: e.Client, Lock: e.Lock, At: e.At,
		Token: e.Token, ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue, Position: e.Position,
		Mode: e.Mode, Cycle: e.Cycle, Requester: e.Requester, Lost: e.Lost, Highest: e.Highest, By: e.By,
		Resource: e.Resource, Predecessors: e.Predecessors, Abort: e.Abort, Truncated: e.Truncated}
}

func fromWire(w wireEvent) service.Event {
	return service.Event{ID: w.ID, Kind: w.Kind.kind(), Client: w.Client, Lock: w.Lock, At: w.At,
		Token: w.Token, ExpiresAt: w.ExpiresAt, FromQueue: w.FromQueue, Position: w.Position,
		Mode: w.Mode, Cycle: w.Cycle, Requester: w.Requester, Lost: w.Lost, Highest: w.Highest, By: w.By,
		Resource: w.Resource, Predecessors: w.Predecessors, Abort: w.Abort, Truncated: w.Truncated}
}

// wakes reports whether the servers' wake-ups and lapse timers need events
// of kind k from the other servers: a grant, abort or withdrawal answers a
// blocked acquire; a renew may move a lapse timer.
func wakes(k lk.EventKind) bool {
	switch k {
	case lk.EventGrant, lk.EventDeadlockAbort, lk.EventWithdraw, lk.EventRenew:
		return true
	}
	return false
}

// publish sends the transaction's events that waiting clients and lapse
// timers elsewhere care about (all of them when numbered, for every
// server's GET /v1/events), in notifications of at most maxPayload bytes.
// The first notification also writes the service row's event counter,
// eventID, in the same statement. An event too large for one loses the
// tail of its explanation (trim); one still too large is replaced by a
// Recheck notice (and for GET /v1/events, a reset). Called just before the
// commit; on a database without peers (nil) it does nothing.
func (p *peerLink) publish(tx *repo.Tx, events []service.Event, numbered bool, eventID int64) error {
	if p == nil {
		return nil
	}
	head := `{"o":"` + p.origin + `","e":[`
	var b strings.Builder
	recheck, skipped := false, false
	// Every transaction with numbered events sends a notification (of
	// them, or that they were too large): its first writes the counter.
	counterWritten := len(events) == 0 || !numbered
	notify := func(payload string) error {
		if !counterWritten {
			counterWritten = true
			return repo.NotifyEventID(tx, payload, eventID)
		}
		return repo.Notify(tx, payload)
	}
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		payload := head + b.String() + "]}"
		b.Reset()
		return notify(payload)
	}
	for _, e := range events {
		if !wakes(e.Kind) && !numbered {
			continue
		}
		one, err := trim(toWire(e), maxPayload-len(head)-2)
		if err != nil {
			return err
		}
		if len(head)+len(one)+2 > maxPayload {
			recheck = recheck || wakes(e.Kind)
			skipped = skipped || numbered
			continue
		}
		if len(head)+b.Len()+1+len(one)+2 > maxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.Write(one)
	}
	if err := flush(); err != nil {
		return err
	}
	if recheck || skipped {
		n := notice{Origin: p.origin, Recheck: recheck, Skipped: skipped}
		if skipped {
			n.Cursor = eventID
		}
		payload, _ := json.Marshal(n)
		return notify(string(payload))
	}
	return nil
}

// trim returns w's JSON, of at most limit bytes if it can: an event
// whose explanation (a grant's predecessors, an abort's cycle, a victim's
// lost leases: with 256-byte names, a few dozen of them fill a
// notification) makes it longer loses the tail of those lists but their
// first entries, and says so (Truncated). What identifies the event, its
// lock, client, token and mode, is never cut; an event still too large is
// returned so.
func trim(w wireEvent, limit int) ([]byte, error) {
	one, err := json.Marshal(w)
	if err != nil || len(one) <= limit {
		return one, err
	}
	w.Truncated = true
	excess := len(one) + len(`,"tr":true`) - limit
	w.Predecessors, excess = cut(w.Predecessors, excess)
	if w.Abort != nil {
		a := *w.Abort
		a.Cycle, excess = cut(a.Cycle, excess)
		w.Abort = &a
	}
	w.Cycle, excess = cut(w.Cycle, excess)
	w.Lost, _ = cut(w.Lost, excess)
	return json.Marshal(w)
}

// cut drops elements from the end of s, keeping the first, until their
// JSON, commas included, made up excess bytes, and returns what is left of
// s and of excess. One is kept as the API's lists are never empty; with
// names of at most 256 bytes, one of each list fits.
func cut[T any](s []T, excess int) ([]T, int) {
	for len(s) > 1 && excess > 0 {
		b, _ := json.Marshal(s[len(s)-1])
		excess -= len(b) + 1
		s = s[:len(s)-1]
	}
	return s, excess
}

// heard is what a listener does with what it hears.
type heard struct {
	// events gets the numbered events of every server's transactions,
	// this one's included, in commit order; resync is called, with no
	// events, each time some may have been missed: when listening
	// starts, first and after a lost connection, and when an event was
	// too large for a notification. cursor is then the id of the last
	// event committed before the events that follow (-1 when unknown).
	events func(events []service.Event, resync bool, cursor int64)
	// others gets the events of the other servers' transactions that
	// wake blocked acquires or move lapse timers (wakes), or, with
	// recheck set, the news that some may have been missed.
	others func(events []service.Event, recheck bool)
}

// listen hears every server's notifications until ctx ends; see heard.
// eventCursor reads the id of the last event committed.
func (p *peerLink) listen(ctx context.Context, db *repo.DB, eventCursor func(context.Context) (int64, error), h heard) error {
	ready := func() {
		h.others(nil, true)
		id, err := eventCursor(ctx)
		if err != nil {
			id = -1
		}
		h.events(nil, true, id)
	}
	return db.Listen(ctx, ready, func(payload string) {
		var n notice
		if json.Unmarshal([]byte(payload), &n) != nil {
			return
		}
		p.numbered(n, h.events) // this server's own too
		if n.Origin == p.origin {
			return
		}
		if n.Recheck {
			h.others(nil, true)
			return
		}
		events := make([]service.Event, 0, len(n.Events))
		for _, w := range n.Events {
			if e := fromWire(w); wakes(e.Kind) {
				events = append(events, e)
			}
		}
		h.others(events, false)
	})
}

// numbered passes sink the numbered events of a notification.
func (p *peerLink) numbered(n notice, sink func([]service.Event, bool, int64)) {
	if len(n.Events) > 0 {
		events := make([]service.Event, 0, len(n.Events))
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
