package leasekeeper

import (
	"bytes"
	"encoding/json"
)

// The operations' results. Their JSON form is the HTTP API's answer
// (docs/api.md); the contract's tuples of `leasekeeper run` are encoded from
// them in package harness alone.

// Outcome says how an operation came out.
type Outcome string

const (
	Granted   Outcome = "granted"   // acquire: the lock is held
	Queued    Outcome = "queued"    // acquire: the client waits in the lock's queue
	Deadlock  Outcome = "deadlock"  // acquire: the requester itself was aborted as a deadlock victim (D5)
	Withdrawn Outcome = "withdrawn" // release of a waiter (L7); a waiting acquire withdrawn from elsewhere
	Released  Outcome = "released"  // release of a holder (L7)
	Renewed   Outcome = "renewed"   // renew
	Revoked   Outcome = "revoked"   // revoke
	OK        Outcome = "ok"        // write
)

// AcquireResult is acquire's answer (L4, D5). Victims lists the clients the
// request aborted as deadlock victims, in abort order, with any outcome;
// with Deadlock it ends with the requester.
type AcquireResult struct {
	Outcome   Outcome  `json:"outcome"`
	Token     int64    `json:"token,omitempty"`      // Granted
	GrantedAt int64    `json:"granted_at,omitempty"` // Granted: the lease's start, the hand-over instant for a waiter (L3)
	ExpiresAt int64    `json:"expires_at,omitempty"` // Granted
	Position  int64    `json:"position,omitempty"`   // Queued: the rank in the queue, 1 = next in line
	Victims   []string `json:"victims,omitempty"`
	// Predecessors (Granted) are the leases whose end made this grant
	// possible (docs/api.md); none for a first grant or a reader joining
	// live readers.
	Predecessors []Predecessor `json:"predecessors,omitempty"`
	// Aborts explains each of Victims, in the same order.
	Aborts []Abort `json:"aborts,omitempty"`
	// EstimatedWait (Queued) is the expected wait in seconds, an estimate
	// from the lock's recent hold times; nil when the lock has no history.
	EstimatedWait *float64 `json:"estimated_wait_s,omitempty"`
	// Reason (Queued) says why a blocked acquire was answered before its
	// wait ran out: ReasonServerStopping. The client is still queued.
	Reason string `json:"reason,omitempty"`
}

// ReasonServerStopping is the Reason of a blocked acquire answered
// "queued" because its server is stopping: the client is still queued,
// and may wait on for what is left of its wait, on another server or on
// this one once restarted (its status shows the grant when it comes).
const ReasonServerStopping = "server_stopping"

// MarshalJSON writes the fields of the outcome, zeros included (a lease
// granted at time 0 has "granted_at": 0), and no others.
func (r AcquireResult) MarshalJSON() ([]byte, error) {
	w := struct {
		Outcome   Outcome  `json:"outcome"`
		Token     *int64   `json:"token,omitempty"`
		GrantedAt *int64   `json:"granted_at,omitempty"`
		ExpiresAt *int64   `json:"expires_at,omitempty"`
		Position  *int64   `json:"position,omitempty"`
		Victims   []string `json:"victims,omitempty"`
		// Predecessors and EstimatedWait follow their outcome, Aborts the victims.
		Predecessors  []Predecessor `json:"predecessors,omitempty"`
		Aborts        []Abort       `json:"aborts,omitempty"`
		EstimatedWait *float64      `json:"estimated_wait_s,omitempty"`
		Reason        string        `json:"reason,omitempty"`
	}{Outcome: r.Outcome, Victims: r.Victims}
	if len(r.Victims) > 0 {
		w.Aborts = r.Aborts
	}
	switch r.Outcome {
	case Granted:
		w.Token, w.GrantedAt, w.ExpiresAt = &r.Token, &r.GrantedAt, &r.ExpiresAt
		w.Predecessors = r.Predecessors
	case Queued:
		w.Position = &r.Position
		w.EstimatedWait, w.Reason = r.EstimatedWait, r.Reason
	}
	return marshal(w)
}

// RenewResult is renew's answer: the lease keeps its token and start.
type RenewResult struct {
	Outcome   Outcome `json:"outcome"` // Renewed
	Token     int64   `json:"token"`
	GrantedAt int64   `json:"granted_at"`
	ExpiresAt int64   `json:"expires_at"`
}

// ReleaseResult is release's answer: Released or Withdrawn (L7).
type ReleaseResult struct {
	Outcome Outcome `json:"outcome"`
}

// RevokeResult is revoke's answer: Revoked.
type RevokeResult struct {
	Outcome Outcome `json:"outcome"`
}

// WriteResult is write's answer: OK.
type WriteResult struct {
	Outcome Outcome `json:"outcome"`
}

// ReadResult is read's answer: the value last accepted for the key and the
// token of the write that stored it, or a nil Value (JSON null) and no token.
type ReadResult struct {
	Value *string `json:"value"`
	Token int64   `json:"token,omitempty"`
}

// Holder is one lease as the answers show it. An answer about one lock
// (inspect's holders) leaves Lock out, one about one client (status's
// holds, a deadlock abort's lost leases) leaves Client out, and the
// wait-for graph's edges have both. Lock and client names are never empty.
type Holder struct {
	Lock      string `json:"lock,omitempty"`
	Client    string `json:"client,omitempty"`
	Mode      Mode   `json:"mode"`
	Token     int64  `json:"token"`
	ExpiresAt int64  `json:"expires_at"`
}

// Waiter is one queue entry; Position is its rank, 1 = next in line.
type Waiter struct {
	Client   string `json:"client"`
	Mode     Mode   `json:"mode"`
	Position int64  `json:"position"`
	// EstimatedWait is the expected wait in seconds from now until this
	// entry is granted, an estimate; nil when the lock has no history.
	EstimatedWait *float64 `json:"estimated_wait_s,omitempty"`
}

// InspectResult is a lock's state: holders by token, queue oldest first (S4).
//
// A page (InspectRequest.Limit) shows a part of both lists: HolderCount and
// QueueLength count them whole, and Next is the After of the next page,
// nil on the last. Without a Limit they are left out of the JSON.
type InspectResult struct {
	Lock        string   `json:"lock"`
	Holders     []Holder `json:"holders"`
	Queue       []Waiter `json:"queue"`
	HolderCount *int64   `json:"holder_count,omitempty"`
	QueueLength *int64   `json:"queue_length,omitempty"`
	Next        *string  `json:"next,omitempty"`
}

// WaitingFor is the lock a client waits for and its rank in that queue.
type WaitingFor struct {
	Lock     string `json:"lock"`
	Position int64  `json:"position"`
	// EstimatedWait is as in Waiter.
	EstimatedWait *float64 `json:"estimated_wait_s,omitempty"`
}

// StatusResult is status's answer (D6). Age is 0 for an unregistered client
// (JSON null); Waiting is nil when the client waits for nothing. Holds is
// a page of them when the request had a Limit: Next is then the lock name
// to pass as the next page's After, nil on the last page.
type StatusResult struct {
	Client  string      `json:"client"`
	Age     int64       `json:"age"`
	Holds   []Holder    `json:"holds"` // by lock name, Client left out
	Waiting *WaitingFor `json:"waiting"`
	Next    *string     `json:"next"`
	// Aborted explains why an unregistered client was last aborted as a
	// deadlock victim, while history keeps it (docs/api.md); nil otherwise.
	Aborted *Abort `json:"aborted,omitempty"`
}

type statusWire struct {
	Client  string      `json:"client"`
	Age     *int64      `json:"age"`
	Holds   []Holder    `json:"holds"`
	Waiting *WaitingFor `json:"waiting"`
	Next    *string     `json:"next"`
	Aborted *Abort      `json:"aborted,omitempty"`
}

// MarshalJSON writes an unregistered client's age as null.
func (r StatusResult) MarshalJSON() ([]byte, error) {
	w := statusWire{Client: r.Client, Holds: r.Holds, Waiting: r.Waiting, Next: r.Next, Aborted: r.Aborted}
	if r.Age != 0 {
		w.Age = &r.Age
	}
	if w.Holds == nil {
		w.Holds = []Holder{}
	}
	return marshal(w)
}

// UnmarshalJSON reads a null age as 0.
func (r *StatusResult) UnmarshalJSON(b []byte) error {
	var w statusWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = StatusResult{Client: w.Client, Holds: w.Holds, Waiting: w.Waiting, Next: w.Next, Aborted: w.Aborted}
	if w.Age != nil {
		r.Age = *w.Age
	}
	return nil
}

// LockSummary is one active lock as the listing shows it: its holders by
// token and how many clients wait for it. OldestWaitS is how long the
// client first in line has waited, in seconds, nil when nobody waits.
//
// Holders are the first LockHoldersShown of the lock's live holders, by
// token; HolderCount counts them all (inspect pages the rest).
type LockSummary struct {
	Lock        string   `json:"lock"`
	Holders     []Holder `json:"holders"`
	HolderCount int64    `json:"holder_count"`
	Waiting     int64    `json:"waiting"`
	OldestWaitS *int64   `json:"oldest_wait_s,omitempty"`
}

// LockHoldersShown is how many holders of each lock a locks page shows.
const LockHoldersShown = 10

// LocksResult is a page of the locks listing. Next is the name to pass as
// the next page's After, nil on the last page.
type LocksResult struct {
	Locks []LockSummary `json:"locks"`
	Next  *string       `json:"next"`
}

// HealthResult is GET /v1/health's answer: Clock is the last time the
// server used, nil before its database served any operation. ServiceID is
// the service's identity, created with its database (a recreated or
// restored one has another): the key under which package fence keeps the
// tokens this service granted (docs/fencing.md).
type HealthResult struct {
	Status    string `json:"status"`
	Clock     *int64 `json:"clock"`
	Version   string `json:"version"`
	ServiceID string `json:"service_id,omitempty"`
}

// ReadyResult is GET /v1/ready's answer, given only while the server can
// commit: Status is "ready".
type ReadyResult struct {
	Status string `json:"status"`
}

// NotReady is GET /v1/ready's 503: why the server cannot serve writes now
// (Reason: shutting_down, disk_full, database_unavailable, commit_timeout
// or commit_failed), beside the error object's code (unavailable, or
// shutting_down) and message, so that a client reading error objects reads
// it too.
type NotReady struct {
	Status  string    `json:"status"` // "not_ready"
	Reason  string    `json:"reason"`
	Code    ErrorCode `json:"error"`
	Message string    `json:"message"`
}

// errorWire is an *Error's JSON form, the HTTP API's error answer.
type errorWire struct {
	Code    ErrorCode `json:"error"`
	Message string    `json:"message"`
	Applied *bool     `json:"applied,omitempty"`
}

// MarshalJSON writes {"error": code, "message": message}, with "applied":
// false when the operation is known not to have happened; a message is
// never empty there: without one, it is the code's text.
func (e *Error) MarshalJSON() ([]byte, error) {
	msg := e.Message
	if msg == "" {
		msg = e.Code.Text()
	}
	return marshal(errorWire{e.Code, msg, e.Applied})
}

// UnmarshalJSON reads {"error": code, "message": message, "applied": ...}.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w errorWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.Code, e.Message, e.Applied = w.Code, w.Message, w.Applied
	return nil
}

// marshal is json.Marshal without its HTML escaping: the answers are read by
// programs, and a message saying ">=" should not say "\u003e=".
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Ending says how a lease ended, in the grant history.
type Ending string

const (
	EndReleased Ending = "released" // its holder released it
	EndLapsed   Ending = "lapsed"   // it ran out (L1); ended at its expires_at
	EndRevoked  Ending = "revoked"  // an admin revoked it
	EndAborted  Ending = "aborted"  // its holder was a deadlock victim (D4.3)
)

// GrantRecord is one grant of the history: a token, who it was granted to,
// and, once the lease ended, when and how. ExpiresAt follows the lease's
// renewals; EndedAt is the instant the lease ended (for a lapse, its
// ExpiresAt: the hand-over instant, L3). EndedAt and Ended are nil while the
// lease is live.
type GrantRecord struct {
	Lock      string  `json:"lock"`
	Token     int64   `json:"token"`
	Client    string  `json:"client"`
	Mode      Mode    `json:"mode"`
	GrantedAt int64   `json:"granted_at"`
	ExpiresAt int64   `json:"expires_at"`
	EndedAt   *int64  `json:"ended_at"`
	Ended     *Ending `json:"ended"`
}

// HistoryResult is a page of the grant history, newest first. Next is the
// Before of the next page, nil on the last one.
type HistoryResult struct {
	Grants []GrantRecord `json:"grants"`
	Next   *string       `json:"next"`
}
