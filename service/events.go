package service

// EventKind says what happened.
type EventKind int

const (
	// EventGranted: a lease was granted, on the spot or (FromQueue) to a
	// waiter, starting at At.
	EventGranted EventKind = iota + 1
	// EventAborted: the client was aborted as a deadlock victim (D4); Cycle
	// holds the clients on cycles through the requester when it was chosen.
	EventAborted
	// EventWithdrawn: the client's queued request was withdrawn by a release.
	EventWithdrawn
	// EventRevoked: the client's lease was ended by Revoke.
	EventRevoked
	// EventLapsed: the client's lease with Token ran out at At (L1).
	EventLapsed
	// EventReleased: the holder released its lease.
	EventReleased
	// EventRenewed: the holder renewed; ExpiresAt is the new expiry.
	EventRenewed
	// EventStaleWrite: the fenced store refused a write with Token, lower
	// than Highest (L6).
	EventStaleWrite
	// EventQueued: the client joined the lock's queue at Position.
	EventQueued
)

// Event is something the service did, reported after its transaction
// committed: what a server needs to answer blocked acquires, count and log.
type Event struct {
	Kind      EventKind
	Client    string
	Lock      string
	At        int64 // the instant it happened (a hand-over's instant, not the noticing operation's ts)
	Token     int64
	ExpiresAt int64
	FromQueue bool     // EventGranted
	Cycle     []string // EventAborted
	Highest   int64    // EventStaleWrite
	// Position is the queue entry an event concerns (EventQueued, a
	// FromQueue EventGranted, EventWithdrawn, and EventAborted of a waiting
	// client), 0 for none. Positions are never reused on a lock, so a
	// blocked acquire tells the fate of its own wait from that of an
	// earlier wait of the same client.
	Position int64
}

// OnCommit sets the function that receives, after each committed transaction,
// the events it caused, in order. It runs with the service locked: it must
// not call the service.
func (s *Service) OnCommit(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCommit = fn
}
