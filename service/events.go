package service

import lk "github.com/leasekeeper/leasekeeper"

// EventKind says what happened.
type EventKind int

const (
	// EventGranted: a lease was granted, on the spot or (FromQueue) to a
	// waiter, starting at At.
	EventGranted EventKind = iota + 1
	// EventAborted: the client was aborted as a deadlock victim (D4); Cycle
	// holds the clients on cycles through the requester when it was chosen,
	// Requester the client whose acquire found the cycle, Lost the leases
	// the victim lost, and Lock, Position and Mode the queue entry it lost
	// (Lock "" when it waited for nothing; for a requester that aborts
	// itself, the lock and mode it asked for, Position 0). It comes before the grants that
	// the aborted leases and queue entry made room for.
	EventAborted
	// EventWithdrawn: the client's queued request was withdrawn by a release.
	EventWithdrawn
	// EventRevoked: the client's lease (Token, Mode) was ended by Revoke.
	EventRevoked
	// EventLapsed: the client's lease with Token ran out at At (L1).
	EventLapsed
	// EventReleased: the holder released its lease (Token, Mode).
	EventReleased
	// EventRenewed: the holder renewed; ExpiresAt is the new expiry.
	EventRenewed
	// EventStaleWrite: the fenced store refused a write with Token, lower
	// than Highest (L6).
	EventStaleWrite
	// EventQueued: the client joined the lock's queue at Position.
	EventQueued
	// EventUnfenced: an administrator set the fenced store's fence for
	// Lock back from Highest to Token, the lock's last issued token
	// (Service.Unfence).
	EventUnfenced
)

// Event is something the service did, reported after its transaction
// committed: what a server needs to answer blocked acquires, count and log.
type Event struct {
	// ID numbers the event for GET /v1/events: it increases by one per
	// event in commit order (NumberEvents; 0 without).
	ID        int64
	Kind      EventKind
	Client    string
	Lock      string
	At        int64 // the instant it happened (a hand-over's instant, not the noticing operation's ts)
	Token     int64
	ExpiresAt int64
	// Mode is the lease's (EventGranted, EventLapsed, EventReleased,
	// EventRevoked) or the queue entry's (EventQueued, EventWithdrawn,
	// EventAborted).
	Mode      lk.Mode
	FromQueue bool      // EventGranted
	Cycle     []string  // EventAborted
	Requester string    // EventAborted
	Lost      []lk.Hold // EventAborted: the victim's leases, by lock name
	Highest   int64     // EventStaleWrite, EventUnfenced
	By        string    // EventUnfenced: the principal that asked, "" when unknown
	// Position is the queue entry an event concerns (EventQueued, a
	// FromQueue EventGranted, EventWithdrawn, and EventAborted of a waiting
	// client), 0 for none. Positions are never reused on a lock, so a
	// blocked acquire tells the fate of its own wait from that of an
	// earlier wait of the same client.
	Position int64
	// Predecessors (EventGranted) are the leases whose end made the grant
	// possible, with Options.Explain (explain.go); nil otherwise.
	Predecessors []lk.Predecessor
	// Abort (EventAborted) explains the victim: its age and the cycle set
	// it was chosen from, oldest first, each with the lock it waits for.
	Abort *lk.Abort
	// Truncated: the lists above lost their tail to fit a notification
	// to the other servers (publish).
	Truncated bool
}

// OnCommit sets the function that receives, after each committed transaction,
// the events it caused, in order. It runs with the service locked: it must
// not call the service.
func (s *Service) OnCommit(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCommit = fn
}

// OnPrepare sets the functions that write a transaction's events ahead of
// its commit, for an audit log that a kill cannot leave behind the
// database: prepare receives the events of each transaction that has some,
// in order, just before its COMMIT (everything else done, notifications to
// peers included), and failed is called when that COMMIT then fails. A
// transaction that commits has had its events through prepare; one cut off
// before its COMMIT by a kill may have too (AuditCommitted tells, later).
// Both run with the service locked: they must not call the service.
func (s *Service) OnPrepare(prepare func([]Event), failed func(error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onPrepare, s.onPrepareFailed = prepare, failed
}

// prepared hands the transaction's events to the OnPrepare function, just
// before its COMMIT.
func (s *Service) prepared() {
	if s.onPrepare != nil && len(s.events) > 0 {
		s.onPrepare(s.events)
	}
}

// commitFailed tells the OnPrepare function that the COMMIT of the events
// it was last given failed.
func (s *Service) commitFailed(err error) {
	if s.onPrepareFailed != nil && len(s.events) > 0 {
		s.onPrepareFailed(err)
	}
}
