// Package leasekeeper holds the vocabulary every layer shares: lock modes,
// one type per operation and one per result, and the error codes
// (docs/contract.md, docs/api.md). The engine (package service) takes these
// requests and returns these results; the replay harness (package harness)
// decodes the contract's JSON arrays into them and encodes their tuples; the
// HTTP server (package server) and the Go client (package client) send them
// as JSON objects. The SQL lives in package repo.
package leasekeeper

import "math"

// Version is leasekeeper's version, shown by `leasekeeper version` and
// GET /v1/health so that an operator can tell old clients and servers from
// new ones during an upgrade (CHANGELOG.md).
var Version = "0.2.0"

// Mode is how a lease holds its lock (docs/contract.md section 3).
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

// AddTime returns t + d for d >= 0, clamped at the largest int64 so that a
// lease near the end of time saturates instead of wrapping (docs/contract.md).
func AddTime(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}
