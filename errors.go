package leasekeeper

import (
	"errors"
	"strings"
)

// ErrorCode names an error of the contract or of the HTTP API, in
// snake_case as the API's error objects carry it: {"error": "stale_token"}.
type ErrorCode string

// The contract's codes: results of an operation, never failures of the
// service (IsContract).
const (
	CodeInvalidArguments ErrorCode = "invalid_arguments" // malformed operation, or time running backwards (rules 1-7)
	CodeInvalidTTL       ErrorCode = "invalid_ttl"       // ttl outside 1..MaxTTL (rule 8)
	CodeClientBusy       ErrorCode = "client_busy"       // acquire by a client that waits, or holds this lock (L8)
	CodeNotHolder        ErrorCode = "not_holder"        // renew, release or revoke without a live lease (L2, L7)
	CodeStaleToken       ErrorCode = "stale_token"       // a store write below the highest accepted token (L6)
)

// The HTTP API's own codes (docs/api.md).
const (
	CodeUnauthenticated  ErrorCode = "unauthenticated"
	CodeForbidden        ErrorCode = "forbidden"
	CodeNotFound         ErrorCode = "not_found"
	CodeMethodNotAllowed ErrorCode = "method_not_allowed"
	CodeBodyTooLarge     ErrorCode = "body_too_large"
	CodeInternal         ErrorCode = "internal"
	CodeUnavailable      ErrorCode = "unavailable"
	CodeShuttingDown     ErrorCode = "shutting_down"
	CodeRateLimited      ErrorCode = "rate_limited"   // a principal over its request rate or its blocked acquires (429, Retry-After)
	CodeQuotaExceeded    ErrorCode = "quota_exceeded" // a fenced-store write beyond the lock's quota of keys or bytes (409)
	// CodeTokenNotGranted: under serve --strict-fencing, a fenced-store
	// write with a token never granted for the lock, or, for a client
	// principal, granted to a client id it may not act as (409).
	CodeTokenNotGranted ErrorCode = "token_not_granted"
)

// Text is the code as the contract's results spell it: "error: " + Text()
// is what `leasekeeper run` prints ("client busy").
func (c ErrorCode) Text() string { return strings.ReplaceAll(string(c), "_", " ") }

// Error is an error with a code and a message that says what was wrong
// ("ttl must be from 1 to 86400 seconds, got 0"). errors.Is matches any
// *Error of the same code, so errors.Is(err, ErrNotHolder) holds for every
// not_holder error, whatever its message.
type Error struct {
	Code    ErrorCode
	Message string
	// Applied, on a 503 of an operation (unavailable, shutting_down), is
	// false when the server knows the operation did not happen: its
	// transaction's COMMIT was never sent. nil when that is unknown (the
	// COMMIT was sent and its answer lost), and on every other error.
	Applied *bool
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.Text()
	}
	return e.Code.Text() + ": " + e.Message
}

// Is reports whether target is an *Error with e's code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns an *Error with code and message.
func Errorf(code ErrorCode, message string) *Error { return &Error{Code: code, Message: message} }

// NotApplied returns e marked as an operation that did not happen (Applied
// false).
func (e *Error) NotApplied() *Error {
	f := false
	e.Applied = &f
	return e
}

// The sentinels of the codes, for errors.Is. The operations of package
// service return the contract's five (wrapped, or as an *Error of the same
// code with a message) and ErrUnavailable; the others are the HTTP API's.
var (
	ErrInvalidArguments = &Error{Code: CodeInvalidArguments}
	ErrInvalidTTL       = &Error{Code: CodeInvalidTTL}
	ErrClientBusy       = &Error{Code: CodeClientBusy}
	ErrNotHolder        = &Error{Code: CodeNotHolder}
	ErrStaleToken       = &Error{Code: CodeStaleToken}

	ErrUnauthenticated  = &Error{Code: CodeUnauthenticated}
	ErrForbidden        = &Error{Code: CodeForbidden}
	ErrNotFound         = &Error{Code: CodeNotFound}
	ErrMethodNotAllowed = &Error{Code: CodeMethodNotAllowed}
	ErrBodyTooLarge     = &Error{Code: CodeBodyTooLarge}
	ErrInternal         = &Error{Code: CodeInternal}
	ErrShuttingDown     = &Error{Code: CodeShuttingDown}
	ErrRateLimited      = &Error{Code: CodeRateLimited}
	ErrQuotaExceeded    = &Error{Code: CodeQuotaExceeded}
	ErrTokenNotGranted  = &Error{Code: CodeTokenNotGranted}
	// ErrUnavailable wraps a failure to reach the database or to finish a
	// transaction on it (a lost connection, a failover, a lock wait or an
	// idle transaction cut off by its timeout). Not a contract result: the
	// operation did not happen, or, when the commit itself was cut off, its
	// outcome is unknown until the state is read again.
	ErrUnavailable = &Error{Code: CodeUnavailable}
)

// IsContract reports whether err is one of the contract's error codes: a
// result to hand back to the caller rather than a failure of the service.
func IsContract(err error) bool {
	switch CodeOf(err) {
	case CodeInvalidArguments, CodeInvalidTTL, CodeClientBusy, CodeNotHolder, CodeStaleToken:
		return true
	}
	return false
}

// CodeOf returns the code of the first *Error in err's chain, or "".
func CodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Code returns the contract's text for err ("client busy", ...), or "" when err
// is not a contract error.
func Code(err error) string {
	if !IsContract(err) {
		return ""
	}
	return CodeOf(err).Text()
}

// Message returns what err says beyond its code: the message of an *Error,
// or the text that wraps a sentinel ("time runs backwards" of
// fmt.Errorf("%w: time runs backwards", ErrInvalidArguments)).
func Message(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	if e.Message != "" {
		return e.Message
	}
	s := err.Error()
	if s == e.Code.Text() {
		return ""
	}
	return strings.TrimPrefix(s, e.Code.Text()+": ")
}
