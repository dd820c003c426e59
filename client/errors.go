package client

import (
	"errors"
	"fmt"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// The contract's error codes (docs/contract.md section 1), as the server
// answers them. They are package leasekeeper's sentinels, so errors.Is
// matches an *Error of either package against them.
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
	ErrBodyTooLarge = lk.ErrBodyTooLarge
	// ErrNotFound, ErrMethodNotAllowed: a path or method the API does not
	// have: a base URL that is not a leasekeeper server's root (one with a
	// path the server does not have; a last /v1 is trimmed by New).
	ErrNotFound         = lk.ErrNotFound
	ErrMethodNotAllowed = lk.ErrMethodNotAllowed
	// ErrInternal: the server's database failed; nothing was acknowledged.
	ErrInternal = lk.ErrInternal
	// ErrShuttingDown: the server is stopping; another server (or this one,
	// restarted) may answer a retry. The operation did not happen
	// (Error.NotApplied).
	ErrShuttingDown = lk.ErrShuttingDown
	// ErrUnavailable (503): the server lost its PostgreSQL database for the
	// moment (a failover, a restart, a lock wait cut off). The operation did
	// not happen when the answer says so (Error.NotApplied); otherwise its
	// commit was cut off and it may have: read the state (Status) before
	// acting on a retry's answer.
	ErrUnavailable = lk.ErrUnavailable
	// ErrUnauthenticated (401): a server with an auth file got no bearer
	// token, or one it does not know (WithBearerToken). Nothing changed.
	ErrUnauthenticated = lk.ErrUnauthenticated
	// ErrForbidden (403): the token's principal may not do this operation, or
	// may not act as this client id (docs/security.md). Nothing changed.
	ErrForbidden = lk.ErrForbidden
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

// Error is an error answer of the server: the API's error object
// {"error": code, "message": ...} with its HTTP status. errors.Is matches it
// against the sentinel of its code (ErrNotHolder, ...). An answer that is not
// the API's has no Code, and says what came in Message.
type Error struct {
	Status     int           // the HTTP status; 0 for a request refused before it was sent
	Code       lk.ErrorCode  // "not_holder", "invalid_arguments", ...
	Message    string        // what was wrong, e.g. "lock is longer than 256 bytes"
	RetryAfter time.Duration // the answer's Retry-After, 0 when none
	// NotApplied: a 5xx answer said "applied": false, the server's word
	// that the operation did not happen (its COMMIT was never sent), so
	// that retrying it is safe. Without it a 5xx answer's operation may
	// have happened or not: the outcome is unknown.
	NotApplied bool
}

// OutcomeUnknown reports whether e's operation may have happened: a 5xx
// answer that did not say "applied": false.
func (e *Error) OutcomeUnknown() bool { return e.Status >= 500 && !e.NotApplied }

func (e *Error) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	case e.Message == "" || e.Message == e.Code.Text():
		return e.Code.Text()
	}
	return e.Code.Text() + ": " + e.Message
}

// Is reports whether target is the sentinel of e's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*lk.Error)
	return ok && e.Code != "" && t.Code == e.Code
}

// QueuedError is Acquire's error when the client was still queued as the
// wait ran out; Acquire has withdrawn the request by then. It matches
// ErrQueued.
type QueuedError struct {
	Position int64    // 1 = next in line
	Victims  []string // clients that the request aborted as deadlock victims, if any
	// WithdrawErr is nil when the server confirmed the withdraw (always
	// so from AcquireOnce's answer, which is not withdrawn); else the last
	// error of the releases Acquire sent for AcquireOptions.WithdrawFor:
	// the client may still be queued.
	WithdrawErr error
}

func (e *QueuedError) Error() string {
	if e.WithdrawErr != nil {
		return fmt.Sprintf("still queued at position %d, and withdrawing the request failed (%v): the client may stay queued until released", e.Position, e.WithdrawErr)
	}
	return fmt.Sprintf("still queued at position %d", e.Position)
}

func (e *QueuedError) Is(target error) bool { return target == ErrQueued }

// GrantLostError is Acquire's error when the lock was granted from the
// queue but the lease was gone by the time the grant's answer arrived: the
// renew Acquire sends to confirm a grant that took over a second to answer
// was refused (the lease lapsed meanwhile, the server or this process
// having been paused, or was released or aborted from elsewhere). Nothing
// is held; a successor may hold the lock. It matches ErrNotHolder through
// Err.
type GrantLostError struct {
	Token int64 // the token of the lost grant
	Err   error // the renew's refusal
}

func (e *GrantLostError) Error() string {
	return fmt.Sprintf("granted token %d from the queue, but the lease was gone before its answer arrived: %v", e.Token, e.Err)
}

func (e *GrantLostError) Unwrap() error { return e.Err }

// DeadlockError is Acquire's answer when the requesting client was aborted as
// a deadlock victim (D5). It matches ErrDeadlock.
type DeadlockError struct {
	Victims []string   // every client the request aborted, in abort order; the requester last
	Aborts  []lk.Abort // why each of Victims was chosen, in the same order (when the server says)
}

func (e *DeadlockError) Error() string {
	return fmt.Sprintf("aborted as a deadlock victim (victims: %s)", strings.Join(e.Victims, ", "))
}

func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// UnknownOutcomeError is Acquire's error when its request may have reached
// the server but no answer said what became of it: the connection broke (the
// server died during the wait, say), ctx ended, or the server answered 5xx.
// Acquire has then tried to withdraw the request (AcquireOptions.WithdrawFor).
// Unwrap gives the acquire's own error, so errors.Is(err, ErrUnavailable) or
// errors.Is(err, context.DeadlineExceeded) see through it.
type UnknownOutcomeError struct {
	Client, Lock string
	Err          error // why the acquire's outcome is unknown
	// WithdrawErr is nil when the server confirmed that the client neither
	// holds nor waits for Lock any more; else the last error of the
	// releases sent to withdraw it: the client may still be queued, or be
	// granted a lease nobody renews, until a release withdraws it.
	WithdrawErr error
}

func (e *UnknownOutcomeError) Error() string {
	if e.WithdrawErr == nil {
		return fmt.Sprintf("no answer to the acquire (%v); the request was withdrawn", e.Err)
	}
	return fmt.Sprintf("no answer to the acquire (%v), nor to the release that withdraws it (%v): %s may stay queued for %q until released",
		e.Err, e.WithdrawErr, e.Client, e.Lock)
}

func (e *UnknownOutcomeError) Unwrap() error { return e.Err }
