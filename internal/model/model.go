// Package model is the test-only reference model of the leasekeeper contract
// (docs/contract.md sections 1-5, with the choices of docs/contract.md).
//
// It is the oracle the real engine is diff-tested against, in the style of
// etcd's robustness model: a state (Model) and a step function (Step) that
// executes one operation and returns its result. It is pure and in memory: no
// goroutines, no clock, no storage. Clarity and faithfulness to the contract
// text come before speed; it only has to be fast enough for the contract's
// load drives.
package model

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
)

// Result strings of the contract (docs/contract.md section 1, "Validation").
const (
	errInvalidArguments = "error: invalid arguments"
	errUnknownOperation = "error: unknown operation"
	errInvalidTTL       = "error: invalid ttl"
	errClientBusy       = "error: client busy"
	errNotHolder        = "error: not holder"
	errStaleToken       = "error: stale token"
)

// Lock modes (docs/contract.md section 3).
const (
	modeShared    = "shared"
	modeExclusive = "exclusive"
)

// The eight operation names (docs/contract.md section 1).
const (
	opAcquire = "acquire"
	opRenew   = "renew"
	opRelease = "release"
	opInspect = "inspect"
	opWrite   = "write"
	opRead    = "read"
	opStatus  = "status"
	opRepeat  = "repeat"
)

// lease is one holder's grant on a lock (L2, S4).
type lease struct {
	lock      *lock
	client    string
	mode      string
	token     int64
	expiresAt int64
	grant     *Grant // its record in the history, when the model keeps one
}

// waiter is one queued acquire (L4); it keeps the requested ttl because the
// lease it eventually gets is [e, e+ttl) for the hand-over instant e (L3).
type waiter struct {
	lock   *lock
	client string
	mode   string
	ttl    int64
	seq    int64 // enqueue order: a queue is always sorted by seq
}

// lock is one named lock. It is never deleted once created, so its fencing
// counter survives times when nobody holds or awaits it (L5).
type lock struct {
	name    string
	holders []*lease  // by token, lowest first (tokens only grow, so append keeps the order)
	queue   []*waiter // oldest first
	counter int64     // last token issued for this lock, 0 before the first grant
}

// client is a registered client (D1). Unregistered clients have no record:
// they cannot hold or wait for anything.
type client struct {
	age     int64
	waiting *waiter           // its one queue entry (L8), nil when not waiting
	holds   map[string]*lease // its live leases, by lock name
}

type storeKey struct{ lock, key string }

// Model is the contract's state.
type Model struct {
	clockSet bool  // the clock starts unset (contract-notes, "Numbers and time")
	now      int64 // the service's current time (validation rule 4)

	locks   map[string]*lock
	held    map[*lock]bool // the locks with at least one holder: where lapses can be
	clients map[string]*client
	lastAge int64 // D1: the last registration number handed out
	lastSeq int64 // the last waiter.seq handed out

	// The fenced store (L6) is independent of the lock table.
	highest map[string]int64 // highest accepted token per lock; absent means 0
	values  map[storeKey]string

	// nextExpiry is a lower bound on every live lease's expires_at (the
	// largest int64 when there is none), so that an operation before it can
	// skip the scan for lapses. It only ever errs low.
	nextExpiry int64

	// aborted counts every client ever aborted by D4; repeat tallies its
	// growth under "aborted" (docs/contract.md section 5).
	aborted int64

	// history is every grant, in grant order, once KeepHistory was called
	// (history.go); nil otherwise.
	history []*Grant
}

// New returns a fresh service state: no locks, no clients, an empty store and
// an unset clock.
func New() *Model {
	return &Model{
		locks:      map[string]*lock{},
		held:       map[*lock]bool{},
		clients:    map[string]*client{},
		highest:    map[string]int64{},
		values:     map[storeKey]string{},
		nextExpiry: math.MaxInt64,
	}
}

// Step executes one operation, given as the raw JSON of one element of the
// operations array (any JSON value), and returns its result as a value that
// encoding/json marshals to exactly the contract's result: a string, nil,
// a []any such as {"granted", token, expires_at}, or a map[string]any.
func (m *Model) Step(op json.RawMessage) any {
	v, ok := decode(op)
	if !ok {
		// Not one JSON value: it cannot be an operation array (rule 1).
		return errInvalidArguments
	}
	return m.exec(v)
}

// Run executes ops in order on a fresh model and returns one result per
// operation (docs/contract.md section 1, the replay harness).
func Run(ops []json.RawMessage) []any {
	m := New()
	results := make([]any, 0, len(ops))
	for _, op := range ops {
		results = append(results, m.Step(op))
	}
	return results
}

// decode parses one JSON value keeping numbers as their literal text, so that
// "is an integer" can be judged on the token as written (contract-notes).
func decode(raw json.RawMessage) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

// exec runs validation steps 1-5 common to every operation (docs/contract.md section 1),
// then hands the arguments after ts to the operation, which does steps 6-9.
func (m *Model) exec(v any) any {
	op, ok := v.([]any)
	if !ok || len(op) == 0 {
		return errInvalidArguments // step 1
	}
	name, ok := op[0].(string)
	if !ok || !isOperationName(name) {
		return errUnknownOperation // step 2
	}
	if len(op) < 2 {
		return errInvalidArguments // step 3
	}
	ts, ok := asInteger(op[1])
	if !ok {
		return errInvalidArguments // step 3
	}
	if m.clockSet && ts < m.now {
		return errInvalidArguments // step 4: nothing happens
	}
	m.advance(ts) // step 5, even if a later check fails
	args := op[2:]
	switch name {
	case opAcquire:
		return m.acquire(ts, args)
	case opRenew:
		return m.renew(ts, args)
	case opRelease:
		return m.release(ts, args)
	case opInspect:
		return m.inspect(args)
	case opWrite:
		return m.write(args)
	case opRead:
		return m.read(args)
	case opStatus:
		return m.status(args)
	default: // opRepeat
		return m.repeat(ts, args)
	}
}

func isOperationName(s string) bool {
	switch s {
	case opAcquire, opRenew, opRelease, opInspect, opWrite, opRead, opStatus, opRepeat:
		return true
	}
	return false
}
