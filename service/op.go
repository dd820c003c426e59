// Package service holds leasekeeper's rules (docs/contract.md sections 2-4).
// Each rule is a function over one operation's context, Op: the
// transaction it runs in, its instant, the service's configuration and the
// state it keeps between operations, and the events it causes. It takes the
// typed requests of package leasekeeper and returns their typed results.
// Nothing here reads a clock, opens a transaction or waits: the runtime
// (internal/engine) does, and calls Settle, then one rule, then Finish, in
// one transaction per operation.
//
// The files are named by what they decide: acquire.go (a request, granted or
// queued), renew.go, release.go (a release, a withdrawal, a revoke),
// handover.go (grants from the queue), lapse.go (leases that ran out),
// deadlock.go, store.go and fencing.go (the fenced store), then what the
// contract does not name: history.go, explain.go, reads.go (the answers
// that change nothing), audit.go and summary.go.
package service

import (
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Config is what the rules are told once, when the database opens.
type Config struct {
	// Quota bounds the fenced store per lock (store.go); the zero value,
	// the contract's, bounds nothing.
	Quota StoreQuota
	// History bounds the grant history (history.go); the zero value keeps
	// the defaults.
	History HistoryRetention
	// StrictFencing makes Write refuse, as lk.ErrTokenNotGranted, a token
	// higher than the lock's last issued one (serve --strict-fencing). The
	// zero value keeps the contract's L6, which accepts any token at least
	// the highest accepted, granted or not.
	StrictFencing bool
	// Explain makes answers say why (explain.go, docs/api.md): grants name
	// their predecessors, a deadlock victim's status its abort, and
	// waiters get an estimated wait (serve turns it on). It costs a few
	// indexed reads per grant and per queued request, which the
	// contract's harness (leasekeeper run) does without: its answers are
	// the contract's tuples, which show none of it.
	Explain bool
}

// State is what the rules keep from one operation to the next. The runtime
// owns it: it reads it from the service row when a transaction begins on a
// database with peers, and puts it back as it was when an operation is
// undone.
type State struct {
	// Counters mirror the service row: the current time (rule 5), the
	// registration counter (D1) and the last event id.
	repo.Counters
	// NextExpiry is a lower bound on the earliest expires_at of all
	// leases, so that operations skip the lapse query when nothing can
	// have lapsed; math.MinInt64 means unknown, math.MaxInt64 none.
	NextExpiry int64
	// PruneAt is the clock at which Settle next looks for history rows
	// past their days (history.go).
	PruneAt int64
}

// NoteExpiry keeps NextExpiry a lower bound after a lease got expiry at.
func (st *State) NoteExpiry(at int64) {
	if at < st.NextExpiry {
		st.NextExpiry = at
	}
}

// Op is one operation in its transaction.
type Op struct {
	Tx     *repo.Tx
	Now    int64 // the operation's instant, ts (rules 4 and 5)
	Config *Config
	State  *State
	// Events are what the operation did, in order (events.go).
	Events []Event
	// Apart: a read on a connection apart from the writer's, which sees
	// the last commit and retires nothing. Where a lease that ended by
	// Now but is not retired yet would change the answer, the read
	// answers ErrNeedsTx (reads.go).
	Apart bool
	// Unregistered: a client was unregistered (an abort, D4.3): the
	// registration counter must be written to the service row, as the
	// clients table no longer shows it.
	Unregistered bool
	// explained is how many of Events have had their grants explained.
	explained int
	// foreseen are the predecessors of exclusive grants made by a
	// hand-over, read with its queue (handOver.head), by lock and token.
	foreseen []foreseen
}

// ErrNeedsTx is a read's answer when it cannot be answered apart: only a
// write transaction at ts, which retires the leases that ended by then,
// knows the answer. The runtime runs the read as an operation instead.
var ErrNeedsTx = errors.New("service: this read needs a write transaction")

// IsRefusal reports whether err is an answer of the rules rather than a
// failure: a contract error (lk.IsContract), or a fenced-store write refused
// for its lock's quota or for a token never granted. After a refusal the
// operation's time advance and lapses stand, and its transaction commits.
func IsRefusal(err error) bool {
	switch lk.CodeOf(err) {
	case lk.CodeQuotaExceeded, lk.CodeTokenNotGranted:
		return true
	}
	return lk.IsContract(err)
}

// Settle begins every operation that may write: every lease that lapsed by
// op.Now is retired and its lock handed over at the instant it ended (L1,
// L3), and history past its days is pruned, a batch at a time.
func Settle(op *Op) error {
	if err := retire(op); err != nil {
		return err
	}
	return pruneHistory(op)
}

// Finish ends every operation that may write: the grants it made get their
// predecessors (explain.go), once all its history rows are written.
func Finish(op *Op) error {
	return explainGrants(op)
}

// foreseen is the predecessors of the exclusive grant of lock's token,
// read just before it was made.
type foreseen struct {
	lock         string
	token        int64
	predecessors []lk.Predecessor
}

// emit records an event of the operation.
func (op *Op) emit(e Event) { op.Events = append(op.Events, e) }
