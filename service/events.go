package service

import lk "github.com/leasekeeper/leasekeeper"

// What the rules did, reported after their transaction commits: what the
// runtime needs to answer blocked acquires, to tell the other servers, to
// stream (GET /v1/events), count and log. Kind is the API's event kind
// (lk.EventKind): a grant, on the spot or (FromQueue) to a waiter, starting
// at At; a deadlock abort (Cycle: the clients on cycles through the
// requester when it was chosen; Requester: the client whose acquire found
// the cycle; Lost: the leases the victim lost; Lock, Position and Mode: the
// queue entry it lost, Lock "" when it waited for nothing, and for a
// requester that aborts itself the lock and mode it asked for, Position 0;
// it comes before the grants that the aborted leases and queue entry made
// room for); a withdrawal; a revoke; a lapse (the lease with Token ran out
// at At, L1); a release; a renew (ExpiresAt is the new expiry); a stale
// write refused (Token below Highest, L6); a queue entry (at Position); an
// unfence (an administrator set the fence back from Highest to Token, the
// lock's last issued token); a fence in a job's own database (package
// fence) refusing the client's Token on Lock, Highest having written
// Resource (ReportStale, stale.go).

// Event is something the service did, reported after its transaction
// committed: what a server needs to answer blocked acquires, count and log.
type Event struct {
	// ID numbers the event for GET /v1/events: it increases by one per
	// event in commit order (NumberEvents; 0 without).
	ID        int64
	Kind      lk.EventKind
	Client    string
	Lock      string
	At        int64 // the instant it happened (a hand-over's instant, not the noticing operation's ts)
	Token     int64
	ExpiresAt int64
	// Mode is the lease's (lk.EventGrant, lk.EventLapse, lk.EventRelease,
	// lk.EventRevoke) or the queue entry's (lk.EventQueue, lk.EventWithdraw,
	// lk.EventDeadlockAbort).
	Mode      lk.Mode
	FromQueue bool        // lk.EventGrant
	Cycle     []string    // lk.EventDeadlockAbort
	Requester string      // lk.EventDeadlockAbort
	Lost      []lk.Holder // lk.EventDeadlockAbort: the victim's leases, by lock name
	Highest   int64       // lk.EventStaleWrite, lk.EventUnfence, lk.EventFenceStale
	Resource  string      // lk.EventFenceStale
	By        string      // lk.EventUnfence: the principal that asked, "" when unknown
	// Position is the queue entry an event concerns (lk.EventQueue, a
	// FromQueue lk.EventGrant, lk.EventWithdraw, and lk.EventDeadlockAbort of a waiting
	// client), 0 for none. Positions are never reused on a lock, so a
	// blocked acquire tells the fate of its own wait from that of an
	// earlier wait of the same client.
	Position int64
	// Predecessors (lk.EventGrant) are the leases whose end made the grant
	// possible, with Options.Explain (explain.go); nil otherwise.
	Predecessors []lk.Predecessor
	// Abort (lk.EventDeadlockAbort) explains the victim: its age and the cycle set
	// it was chosen from, oldest first, each with the lock it waits for.
	Abort *lk.Abort
	// Truncated: the lists above lost their tail to fit a notification
	// to the other servers (publish).
	Truncated bool
}

// API returns the event as GET /v1/events shows it to a reader that sees
// every client id.
func (e Event) API() lk.Event {
	out := lk.Event{ID: e.ID, Kind: e.Kind, At: e.At, Lock: e.Lock, Token: e.Token,
		ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue, Position: e.Position, Lost: e.Lost, Highest: e.Highest,
		Resource: e.Resource, Predecessors: e.Predecessors, Abort: e.Abort, Truncated: e.Truncated}
	if e.Client != "" {
		out.Client = &e.Client
	}
	if e.Requester != "" {
		out.Requester = &e.Requester
	}
	switch e.Kind {
	case lk.EventGrant, lk.EventLapse, lk.EventRelease, lk.EventRevoke, lk.EventWithdraw, lk.EventDeadlockAbort, lk.EventQueue, lk.EventRenew:
		out.Mode = e.Mode
	}
	switch e.Kind {
	case lk.EventLapse, lk.EventRelease, lk.EventRevoke, lk.EventQueue, lk.EventWithdraw, lk.EventDeadlockAbort:
		out.ExpiresAt = 0 // only grant and renew carry it
	}
	return out
}
