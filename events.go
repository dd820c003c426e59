package leasekeeper

import "encoding/json"

// EventKind names what an event of GET /v1/events reports.
type EventKind string

const (
	EventGrant         EventKind = "grant"          // a lease was granted, on the spot or from the queue
	EventRenew         EventKind = "renew"          // a holder renewed; ExpiresAt is the new end
	EventRelease       EventKind = "release"        // a holder released its lease
	EventLapse         EventKind = "lapse"          // a lease ran out at At, its expires_at (L1)
	EventRevoke        EventKind = "revoke"         // an admin revoked a lease
	EventWithdraw      EventKind = "withdraw"       // a queued request was withdrawn by its client's release
	EventQueue         EventKind = "queue"          // a client joined a lock's queue at Position
	EventDeadlockAbort EventKind = "deadlock_abort" // a client was aborted as a deadlock victim (Abort says why)
	EventStaleWrite    EventKind = "stale_write"    // the fenced store refused a write with Token, below Highest
	EventUnfence       EventKind = "unfence"        // an admin set a lock's fence back from Highest to Token
	EventFenceStale    EventKind = "fence_stale"    // a fence in a job's own database refused Token, Highest having written Resource (POST /v1/stale)
	// EventReset is sent alone to a reader resuming from an id older than
	// the server's buffer, or after events were lost: it must read the
	// state again. EventOverflow ends the stream of a reader too slow for
	// its buffer.
	EventReset    EventKind = "reset"
	EventOverflow EventKind = "overflow"
)

// Event is one event of GET /v1/events (its data line) and of
// Client.Watch. ID increases in commit order; with several servers on one
// PostgreSQL it is global. The first seven fields are always in the JSON
// (null where the kind has none); the others only with the kinds that have
// them.
type Event struct {
	ID     int64     `json:"id"`
	Kind   EventKind `json:"kind"`
	At     int64     `json:"at"`
	Lock   string    `json:"lock"`
	Client *string   `json:"client"` // null for a client id a client principal may not act as
	Token  int64     `json:"token"`
	Mode   Mode      `json:"mode"`

	ExpiresAt    int64         `json:"expires_at,omitempty"`   // grant, renew
	FromQueue    bool          `json:"from_queue,omitempty"`   // grant
	Predecessors []Predecessor `json:"predecessors,omitempty"` // grant
	Position     int64         `json:"position,omitempty"`     // queue, withdraw; grant from the queue
	Abort        *Abort        `json:"abort,omitempty"`        // deadlock_abort
	Requester    *string       `json:"requester,omitempty"`    // deadlock_abort: whose acquire found the cycle
	Lost         []Holder      `json:"lost,omitempty"`         // deadlock_abort: the victim's leases, Client left out
	Highest      int64         `json:"highest,omitempty"`      // stale_write, unfence, fence_stale
	Resource     string        `json:"resource,omitempty"`     // fence_stale: what the refused job wrote
	// Truncated: predecessors, abort's cycle or lost lost their tail, so
	// that the event fits a notification between servers on PostgreSQL.
	Truncated bool `json:"truncated,omitempty"`
}

// EventFilter selects events: all of its set fields must match. Lock is
// exact; Prefix matches lock names starting with it.
type EventFilter struct {
	Lock   string
	Prefix string
	Client string
}

// eventHead is the part of an Event's JSON that every kind has, null where
// the kind has none.
type eventHead struct {
	ID     int64     `json:"id"`
	Kind   EventKind `json:"kind"`
	At     int64     `json:"at"`
	Lock   *string   `json:"lock"`
	Client *string   `json:"client"`
	Token  *int64    `json:"token"`
	Mode   *Mode     `json:"mode"`
}

// eventTail is the rest: only what the kind has.
type eventTail struct {
	ExpiresAt    int64         `json:"expires_at,omitempty"`
	FromQueue    bool          `json:"from_queue,omitempty"`
	Predecessors []Predecessor `json:"predecessors,omitempty"`
	Position     int64         `json:"position,omitempty"`
	Abort        *Abort        `json:"abort,omitempty"`
	Requester    *string       `json:"requester,omitempty"`
	Lost         []Holder      `json:"lost,omitempty"`
	Highest      int64         `json:"highest,omitempty"`
	Resource     string        `json:"resource,omitempty"`
	Truncated    bool          `json:"truncated,omitempty"`
}

// MarshalJSON writes the first seven fields always, in their order, with
// null for a lock, client, token (tokens start at 1) or mode the event
// does not have.
func (e Event) MarshalJSON() ([]byte, error) {
	h := eventHead{ID: e.ID, Kind: e.Kind, At: e.At, Client: e.Client}
	if e.Lock != "" {
		h.Lock = &e.Lock
	}
	if e.Token != 0 {
		h.Token = &e.Token
	}
	if e.Mode != "" {
		h.Mode = &e.Mode
	}
	head, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	tail, err := json.Marshal(eventTail{ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue,
		Predecessors: e.Predecessors, Position: e.Position, Abort: e.Abort, Requester: e.Requester,
		Lost: e.Lost, Highest: e.Highest, Resource: e.Resource, Truncated: e.Truncated})
	if err != nil {
		return nil, err
	}
	if len(tail) <= 2 { // {}
		return head, nil
	}
	out := append(head[:len(head)-1], ',')
	return append(out, tail[1:]...), nil
}

// UnmarshalJSON reads what MarshalJSON writes; a null leaves the zero
// value, and an Event reused for the next line keeps nothing of the last.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event // without these methods
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*e = Event(p)
	return nil
}
