// Package leasekeeper holds the domain words shared by every layer: lock modes,
// the results of the operations, and the contract's error codes
// (SPEC.md sections 1-4). The rules live in package service, the SQL in
// package repo, the JSON operations in package harness.
package leasekeeper

import (
	"errors"
	"math"
)

// Mode is how a lease holds its lock (SPEC.md section 3).
type Mode string

const (
	Shared    Mode = "shared"
	Exclusive Mode = "exclusive"
)

// Valid reports whether m is one of the two modes.
func (m Mode) Valid() bool { return m == Shared || m == Exclusive }

// Compatible reports whether a request in mode req can join holders whose mode
// is held (S1). held is "" when the lock has no holders.
func Compatible(held, req Mode) bool {
	return held == "" || (held == Shared && req == Shared)
}

// MaxTTL is the longest lease a request may ask for, in seconds (rule 8).
const MaxTTL = 86400

// The contract's error codes. Every operation of package service returns one
// of these (possibly wrapped) or an infrastructure error; IsContract tells
// them apart.
var (
	// ErrInvalidArguments: malformed operation, or time running backwards (rules 1-7).
	ErrInvalidArguments = errors.New("invalid arguments")
	// ErrInvalidTTL: ttl outside 1..MaxTTL (rule 8).
	ErrInvalidTTL = errors.New("invalid ttl")
	// ErrClientBusy: acquire by a client that waits for a lock or already holds this one (L8).
	ErrClientBusy = errors.New("client busy")
	// ErrNotHolder: renew or release by a client without a live lease (L2, L7).
	ErrNotHolder = errors.New("not holder")
	// ErrStaleToken: a fenced-store write below the highest accepted token (L6).
	ErrStaleToken = errors.New("stale token")
)

// ErrUnavailable wraps a failure to reach the database or to finish a
// transaction on it (a lost connection, a failover, a lock wait or an idle
// transaction cut off by its timeout). Not a contract result: the operation
// did not happen, or, when the commit itself was cut off, its outcome is
// unknown until the state is read again.
var ErrUnavailable = errors.New("database unavailable")

var contractErrors = []error{ErrInvalidArguments, ErrInvalidTTL, ErrClientBusy, ErrNotHolder, ErrStaleToken}

// IsContract reports whether err is one of the contract's error codes, i.e. a
// result to hand back to the caller rather than a failure of the service.
func IsContract(err error) bool {
	for _, c := range contractErrors {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// Code returns the contract's text for err ("client busy", ...), or "" when err
// is not a contract error.
func Code(err error) string {
	for _, c := range contractErrors {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	return ""
}

// AddTime returns t + d for d >= 0, clamped at the largest int64 so that a
// lease near the end of time saturates instead of wrapping (docs/contract-notes.md).
func AddTime(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// Outcome is what an acquire did.
type Outcome int

const (
	Granted Outcome = iota + 1
	Queued
	Deadlock // the requester itself was aborted as a deadlock victim (D5)
)

// AcquireResult is an acquire's answer (L4, D5).
type AcquireResult struct {
	Outcome   Outcome
	Token     int64    // Granted
	ExpiresAt int64    // Granted
	Position  int64    // Queued: 1 = next in line
	Victims   []string // clients aborted by this request, in abort order
}

// Lease is a live lease as renew returns it.
type Lease struct {
	Token     int64
	ExpiresAt int64
}

// ReleaseOutcome tells a holder's release from a waiter's withdrawal (L7).
type ReleaseOutcome int

const (
	Released ReleaseOutcome = iota + 1
	Withdrawn
)

// Holder is one lease on a lock, as inspect lists it.
type Holder struct {
	Client    string
	Mode      Mode
	Token     int64
	ExpiresAt int64
}

// Waiter is one queue entry, as inspect lists it.
type Waiter struct {
	Client string
	Mode   Mode
}

// Inspection is a lock's state: holders by token, queue oldest first (S4).
type Inspection struct {
	Holders []Holder
	Queue   []Waiter
}

// Hold is one lease of a client, as status lists it.
type Hold struct {
	Lock      string `db:"lock"`
	Mode      Mode   `db:"mode"`
	Token     int64  `db:"token"`
	ExpiresAt int64  `db:"expires_at"`
}

// ClientStatus is status's answer (D6). Age is 0 for an unregistered client;
// Waiting is "" when the client waits for nothing.
type ClientStatus struct {
	Age     int64
	Holds   []Hold
	Waiting string
}

// LockSummary is one active lock as a listing shows it: its holders by token
// and how many clients wait for it.
type LockSummary struct {
	Lock    string
	Holders []Holder
	Waiting int64
}
