package client

import (
	"errors"
	"fmt"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
)

// The contract's error codes (SPEC.md section 1), as the server answers them.
// They are the same values as package leasekeeper's, so errors.Is matches
// either. An *Error with the code matches its sentinel.
var (
	// ErrInvalidArguments: a missing or mistyped field (a TTL or Wait that is
	// not a whole number of seconds, say), or a name or value beyond the API's
	// limits.
	ErrInvalidArguments = lk.ErrInvalidArguments
	// ErrInvalidTTL: a ttl outside 1..86400 seconds.
	ErrInvalidTTL = lk.ErrInvalidTTL
	// ErrClientBusy: Acquire by a client that already waits for a lock or
	// holds this one (L8).
	ErrClientBusy = lk.ErrClientBusy
	// ErrNotHolder: Renew or Release by a client without a live lease on the
	// lock (L2, L7); also the reason a Lease was lost when its renew was refused.
	ErrNotHolder = lk.ErrNotHolder
	// ErrStaleToken: Write with a token lower than one the fenced store
	// already accepted for the lock (L6).
	ErrStaleToken = lk.ErrStaleToken
)

// The server's own error codes (docs/api.md).
var (
	// ErrBodyTooLarge: a request body over the server's limit (131,072
	// bytes); a value within the API's limits never causes it.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrNotFound, ErrMethodNotAllowed: a path or method the API does not
	// have, from Do with a Call of one's own, or a base URL that is not a
	// leasekeeper server.
	ErrNotFound         = errors.New("not found")
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrInternal: the server's database failed; nothing was acknowledged.
	ErrInternal = errors.New("internal")
	// ErrShuttingDown: the server is stopping; another server (or this one,
	// restarted) may answer a retry.
	ErrShuttingDown = errors.New("shutting down")
	// ErrUnavailable (503): the server lost its PostgreSQL database for the
	// moment (a failover, a restart, a lock wait cut off). The operation did
	// not happen, or, when the commit itself was cut off, it may have: read
	// the state (Status) before acting on a retry's answer.
	ErrUnavailable = errors.New("unavailable")
	// ErrUnauthenticated (401): a server with an auth file got no bearer
	// token, or one it does not know (WithBearerToken). Nothing changed.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden (403): the token's principal may not do this operation, or
	// may not act as this client id (docs/security.md). Nothing changed.
	ErrForbidden = errors.New("forbidden")
)

// Acquire's answers other than a grant.
var (
	// ErrQueued: the client was still queued when the wait ran out
	// (a *QueuedError tells the position).
	ErrQueued = errors.New("still queued")
	// ErrDeadlock: the client was aborted as a deadlock victim (D4): it no
	// longer holds any lock (a *DeadlockError tells the victims).
	ErrDeadlock = errors.New("aborted as a deadlock victim")
	// ErrWithdrawn: the client's queued request was withdrawn by a release
	// from elsewhere while it waited.
	ErrWithdrawn = errors.New("withdrawn while waiting")
)

// What Lease.Err reports once Lost is closed, besides an *Error with
// ErrNotHolder when the server refused a renew.
var (
	// ErrReleased: Release was called.
	ErrReleased = errors.New("lease released")
	// ErrExpired: renewing failed until the lease may have ended.
	ErrExpired = errors.New("lease expired without a successful renew")
)

var codes = map[string]error{}

func init() {
	for _, err := range []error{ErrInvalidArguments, ErrInvalidTTL, ErrClientBusy, ErrNotHolder, ErrStaleToken,
		ErrBodyTooLarge, ErrNotFound, ErrMethodNotAllowed, ErrInternal, ErrShuttingDown,
		ErrUnavailable, ErrUnauthenticated, ErrForbidden} {
		codes[err.Error()] = err
	}
}

// Error is an error result of the server: a body "error: <code>", or
// "error: <code>: <detail>" when the server says more.
type Error struct {
	Status int    // the HTTP status
	Code   string // "not holder", "invalid arguments", ...; "" when the answer was not an error string
	Detail string // what follows the code, e.g. "lock is longer than 256 bytes"
}

func (e *Error) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("%s (HTTP %d)", e.Detail, e.Status)
	case e.Detail == "":
		return e.Code
	}
	return e.Code + ": " + e.Detail
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	s, ok := codes[e.Code]
	return ok && s == target
}

// QueuedError is an acquire's answer ["queued", position] when the client was
// still queued as the wait ran out: Client.Acquire has withdrawn the request
// by then, Result.Err of a raw acquire has not. It matches ErrQueued.
type QueuedError struct {
	Position int64    // 1 = next in line
	Victims  []string // clients that the request aborted as deadlock victims, if any
}

func (e *QueuedError) Error() string {
	return fmt.Sprintf("still queued at position %d", e.Position)
}

func (e *QueuedError) Is(target error) bool { return target == ErrQueued }

// DeadlockError is Acquire's answer when the requesting client was aborted as
// a deadlock victim (D5). It matches ErrDeadlock.
type DeadlockError struct {
	Victims []string // every client the request aborted, in abort order; the requester last
}

func (e *DeadlockError) Error() string {
	return fmt.Sprintf("aborted as a deadlock victim (victims: %s)", strings.Join(e.Victims, ", "))
}

func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }
