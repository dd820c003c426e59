// Package history is what a robustness run records (docs/robustness.md):
// each operation of the API that a recording client sent (package
// traffic), with its input, its output, the moments it was sent and
// answered, and whether its outcome is unknown (Op); and each fault done
// meanwhile to a server or its database (Fault), which the cluster notes
// (package cluster). The porcupine model (package model) and the checks
// (package validate) read it.
//
// It is the lowest package of the framework: the others share its types,
// and it uses none of theirs.
package history

import (
	"fmt"
	"slices"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// Kind is an operation of the API that the recording client sends.
type Kind string

const (
	Acquire Kind = "acquire"
	Renew   Kind = "renew"
	Release Kind = "release"
	Write   Kind = "write"
	Read    Kind = "read"
)

// Input is an operation as sent.
type Input struct {
	Kind Kind `json:"kind"`
	// Client is the client id that acquires, renews or releases; for a
	// write or a read, which name none in the API, the client id whose
	// work it is (the models use it to keep a client's operations in
	// order; it is not sent).
	Client string  `json:"client,omitempty"`
	Lock   string  `json:"lock"`
	TTL    int64   `json:"ttl,omitempty"`
	Mode   lk.Mode `json:"mode,omitempty"`
	Wait   int64   `json:"wait,omitempty"` // acquire: seconds the server may hold the request
	Key    string  `json:"key,omitempty"`
	Value  string  `json:"value,omitempty"`
	Token  int64   `json:"token,omitempty"`
	// Final marks a read made after the workload, with every server up and
	// nothing else running: what the store kept (the invariant checks).
	Final bool `json:"final,omitempty"`
}

// Output is an operation's outcome as the client saw it.
type Output struct {
	// Unknown: no answer (a timeout, a connection reset) or a 5xx answer;
	// the operation may or may not have happened.
	Unknown bool `json:"unknown,omitempty"`
	// NotSent: the connection was refused, so no server saw the request
	// and the operation did not happen. The checks and the model skip it.
	NotSent bool `json:"not_sent,omitempty"`
	// NotApplied: a 5xx answer that said "applied": false, the server's
	// word that the operation did not happen. The recording client trusts
	// it, as a client would: the checks and the model skip the operation
	// as one not sent, so a server that says so of an operation that did
	// happen (failpoint wrong-not-applied) leaves effects that no
	// operation explains.
	NotApplied bool `json:"not_applied,omitempty"`
	// Err is the code of an error answer below 500: the operation was
	// judged and refused (client_busy, not_holder, stale_token, ...).
	Err       lk.ErrorCode `json:"error,omitempty"`
	Outcome   lk.Outcome   `json:"outcome,omitempty"`
	Token     int64        `json:"token,omitempty"`
	GrantedAt int64        `json:"granted_at,omitempty"`
	ExpiresAt int64        `json:"expires_at,omitempty"`
	Position  int64        `json:"position,omitempty"`
	Value     *string      `json:"value,omitempty"` // read: nil for null
	// Status is the HTTP status of a 5xx answer (an unknown outcome): 503
	// says the server knew the database was away, 500 that it failed.
	Status int `json:"status,omitempty"`
	// Code and RetryAfter (seconds) are the error code and Retry-After of
	// that 5xx answer: what it promised the client (CheckUnavailable).
	Code       lk.ErrorCode `json:"code,omitempty"`
	RetryAfter int64        `json:"retry_after,omitempty"`
	// Detail says why an outcome is unknown, or the error's message.
	Detail string `json:"detail,omitempty"`
}

// Known reports whether the operation was answered, below 500.
func (o Output) Known() bool { return !o.Unknown && !o.NotSent && !o.NotApplied }

// Skipped reports whether the operation did not happen, as its client was
// told: never sent, or answered "applied": false.
func (o Output) Skipped() bool { return o.NotSent || o.NotApplied }

// Op is one recorded operation. Times are nanoseconds since the history's
// start, on the monotonic clock.
type Op struct {
	ID     int `json:"id"`
	Worker int `json:"worker"` // the recording client that sent it
	Server int `json:"server"` // the index of the server it was sent to
	// Incarnation is the server's start number (1 for its first process)
	// when the operation was sent.
	Incarnation int    `json:"incarnation"`
	Input       Input  `json:"input"`
	Output      Output `json:"output"`
	Call        int64  `json:"call"`
	// Return is when the answer came; for an unknown outcome, when the
	// client stopped waiting (the operation may take effect later still:
	// the checkers treat its return as never).
	Return int64 `json:"return"`
}

// Fault is something done to a server: kill, stop, start, pause, resume.
type Fault struct {
	At          int64  `json:"at"` // nanoseconds since the history's start
	Kind        string `json:"fault"`
	Server      int    `json:"server"`
	Incarnation int    `json:"incarnation"` // the server's start number it was done to
	// Settled, for a kill, is when everything the killed process started
	// had taken effect, if ever: the moment it was gone on SQLite (its
	// commits are its own), a margin later on PostgreSQL (which may still
	// commit a transaction whose COMMIT it received). An operation sent to
	// that process with an unknown outcome took effect by then or never.
	Settled int64 `json:"settled,omitempty"`
}

// The fault kinds that one package notes and others read, declared here
// for both: the cluster or a scenario notes them, the model and the checks
// read them. The cluster's other words ("kill", "start", "pause",
// "cut-db", ...) are spelled out where used (docs/robustness.md).
const (
	// FaultPrimaryCrash: the primary stopped as a power cut would stop it
	// (immediate shutdown, no goodbye to its clients). Noted as it begins,
	// with Server -1: no server's.
	FaultPrimaryCrash = "db-crash"
	// FaultPromote: the standby promoted, taking writes. Noted once it
	// does, with Server -1; its Settled bounds what the outage's unknown
	// outcomes did (the model's Operations).
	FaultPromote = "db-promote"
	// FaultClockStep notes that a server's own clock was set to step (the
	// failpoint clock-step-back) at or after this moment: from then on the
	// server's seconds (granted_at, expires_at) need not be this machine's,
	// and a check that reads them as this machine's time must not judge the
	// operations that follow.
	FaultClockStep = "clock-step"
	// FaultCommitThenFail notes that a server answers some groups whose
	// COMMIT succeeded as if it had failed (the failpoint
	// commit-then-fail), from this moment on: 503s are its doing.
	FaultCommitThenFail = "commit-then-fail"
)

// History is what a run recorded: operations and faults. It is safe for
// concurrent use.
type History struct {
	start  time.Time
	mu     sync.Mutex
	ops    []Op
	faults []Fault
	// answerSettle is how long after a 5xx answer its operation may still
	// take effect, when answerSettleKnown (SetAnswerSettle); otherwise
	// such an operation may take effect at any time after its call.
	answerSettle      int64
	answerSettleKnown bool
}

// SetAnswerSettle says how long after the server answered 5xx the
// operation may still have taken effect: none on SQLite, whose server
// commits in its own process and does nothing more for a request once it
// answered (a 503 for a full disk rolled back, or, after an fsync error,
// may have committed, but before the answer); on PostgreSQL, a COMMIT the
// database had received when the connection broke. The Cluster sets it.
// Without it a 5xx answer counts as no answer at all, which costs
// porcupine dearly when thousands of them come (a full disk).
func (h *History) SetAnswerSettle(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answerSettle, h.answerSettleKnown = int64(d), true
}

// AnswerSettle is what SetAnswerSettle set, or -1 when it was not called:
// then a 5xx answer bounds nothing.
func (h *History) AnswerSettle() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.answerSettleKnown {
		return -1
	}
	return time.Duration(h.answerSettle)
}

// New starts an empty history; its clock starts now.
func New() *History { return &History{start: time.Now()} }

// Now is the time since the history's start, in nanoseconds, on the
// monotonic clock.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Wall is the wall-clock time of a history time: for comparing it with the
// server's times (granted_at, expires_at), which are Unix seconds of the
// same machine's clock (or of the database's, on the same machine).
func (h *History) Wall(at int64) time.Time { return h.start.Add(time.Duration(at)) }

// Start is the wall-clock time the history started.
func (h *History) Start() time.Time { return h.start }

// Fault notes a fault done now to a server's incarnation; settle is how
// long after now the effects of a killed process may still appear
// (Fault.Settled).
func (h *History) Fault(kind string, server, incarnation int, settle time.Duration) {
	at := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, Fault{At: at, Kind: kind, Server: server, Incarnation: incarnation, Settled: at + int64(settle)})
}

// Record adds an operation to the history, its times already on h's
// clock, and returns it with its ID: the recording client's, or one
// recorded elsewhere (by a job, in a process of its own).
func (h *History) Record(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.ID = len(h.ops)
	h.ops = append(h.ops, op)
	return op
}

// RecordFault adds a fault noted elsewhere, its times already on h's
// clock: for histories made by hand, in the checks' own tests.
func (h *History) RecordFault(f Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
}

// Ops returns a copy of the operations, in the order they returned.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// Faults returns a copy of the faults, in time order.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.faults)
}

// String is an operation in one line, for messages.
func (op Op) String() string {
	in, out := op.Input, op.Output
	var s string
	switch in.Kind {
	case Acquire:
		s = fmt.Sprintf("acquire(%s, %s, ttl %d, %s, wait %d)", in.Client, in.Lock, in.TTL, in.Mode, in.Wait)
	case Renew:
		s = fmt.Sprintf("renew(%s, %s, ttl %d)", in.Client, in.Lock, in.TTL)
	case Release:
		s = fmt.Sprintf("release(%s, %s)", in.Client, in.Lock)
	case Write:
		s = fmt.Sprintf("write(%s, %s=%q, token %d) by %s", in.Lock, in.Key, in.Value, in.Token, in.Client)
	case Read:
		s = fmt.Sprintf("read(%s, %s)", in.Lock, in.Key)
		if in.Final {
			s = "final " + s
		}
	}
	return fmt.Sprintf("#%d %s -> %s [%s, %s] server %d", op.ID, s, out, seconds(op.Call), secondsReturn(op), op.Server)
}

func (o Output) String() string {
	switch {
	case o.Unknown:
		return "unknown (" + o.Detail + ")"
	case o.NotSent:
		return "not sent (" + o.Detail + ")"
	case o.NotApplied:
		return "not applied (" + o.Detail + ")"
	case o.Err != "":
		return "error " + string(o.Err)
	case o.Outcome == lk.Granted || o.Outcome == lk.Renewed:
		return fmt.Sprintf("%s token %d [%d, %d)", o.Outcome, o.Token, o.GrantedAt, o.ExpiresAt)
	case o.Outcome == lk.Queued:
		return fmt.Sprintf("queued at %d", o.Position)
	case o.Outcome != "":
		return string(o.Outcome)
	case o.Value == nil:
		return "null"
	}
	return fmt.Sprintf("%q token %d", *o.Value, o.Token)
}

// seconds is a time of the history, for messages.
func seconds(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

func secondsReturn(op Op) string {
	if op.Output.Unknown {
		return "?"
	}
	return seconds(op.Return)
}
