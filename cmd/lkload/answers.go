package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// lkload measures servers from before and after the API answered JSON
// objects, so it reads both shapes of answer, telling them apart per answer
// by its first character:
//
//   - the old positional tuples: `["granted", 7, 1767225630]`,
//     `["queued", 2]`, `"released"`, `"error: not holder"`;
//   - the objects: `{"outcome": "granted", "token": 7, "granted_at": ...,
//     "expires_at": ...}`, `{"outcome": "released"}`,
//     `{"error": "not_holder", "message": "..."}`.

// answer is what lkload needs of an answer, whichever its shape.
type answer struct {
	outcome string // "granted", "released", "withdrawn", ...; "" for an error
	err     string // an error answer: its code ("not_holder") or old text ("error: not holder")
	token   int64  // of a grant
}

// parseAnswer reads an answer of either shape.
func parseAnswer(body []byte) (answer, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return answer{}, errors.New("empty answer")
	}
	switch body[0] {
	case '{':
		return parseObject(body)
	case '[', '"':
		return parseTuple(body)
	}
	return answer{}, fmt.Errorf("answer %q is neither a JSON object nor an old tuple", body)
}

// parseObject reads the new shape: a result with an "outcome", or an error
// with an "error" code.
func parseObject(body []byte) (answer, error) {
	var o struct {
		Outcome   *string `json:"outcome"`
		Error     *string `json:"error"`
		Token     *int64  `json:"token"`
		ExpiresAt *int64  `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return answer{}, fmt.Errorf("answer %q: %w", body, err)
	}
	switch {
	case o.Error != nil && o.Outcome == nil && *o.Error != "":
		return answer{err: *o.Error}, nil
	case o.Outcome == nil || o.Error != nil || *o.Outcome == "":
		return answer{}, fmt.Errorf("answer %q has neither an outcome nor an error code", body)
	case *o.Outcome == "granted" && (o.Token == nil || *o.Token < 1 || o.ExpiresAt == nil):
		return answer{}, fmt.Errorf("answer %q is a grant without a token or expires_at", body)
	}
	a := answer{outcome: *o.Outcome}
	if o.Token != nil {
		a.token = *o.Token
	}
	return a, nil
}

// parseTuple reads the old shape: ["granted", token, expires_at(, victims)],
// ["queued", position(, victims)], ["deadlock", victims], or a string,
// "released" or "error: ...".
func parseTuple(body []byte) (answer, error) {
	if body[0] == '"' {
		var s string
		if err := json.Unmarshal(body, &s); err != nil {
			return answer{}, fmt.Errorf("answer %q: %w", body, err)
		}
		if strings.HasPrefix(s, "error: ") {
			return answer{err: s}, nil
		}
		if s == "" {
			return answer{}, fmt.Errorf("answer %q is an empty outcome", body)
		}
		return answer{outcome: s}, nil
	}
	var t []json.RawMessage
	if err := json.Unmarshal(body, &t); err != nil {
		return answer{}, fmt.Errorf("answer %q: %w", body, err)
	}
	var a answer
	if len(t) == 0 || json.Unmarshal(t[0], &a.outcome) != nil || a.outcome == "" {
		return answer{}, fmt.Errorf("answer %q does not start with an outcome", body)
	}
	if a.outcome == "granted" {
		var expires int64
		if len(t) < 3 || json.Unmarshal(t[1], &a.token) != nil || a.token < 1 || json.Unmarshal(t[2], &expires) != nil {
			return answer{}, fmt.Errorf("answer %q is not [\"granted\", token, expires_at]", body)
		}
	}
	return a, nil
}

// The usual grant and release, in each shape, as the servers write them:
// the raw client recognises these by their start, without decoding (it
// shares the CPU with the server it measures), and decodes anything else.
var (
	oldGranted  = []byte(`["granted",`)
	newGranted  = []byte(`{"outcome":"granted",`)
	oldReleased = []byte(`"released"`)
	newReleased = []byte(`{"outcome":"released"}`)
	newRenewed  = []byte(`{"outcome":"renewed",`)
)

// isGranted: a 200 answer to acquire that grants the lock. quick accepts
// the usual start of a grant without decoding the rest.
func isGranted(status int, body []byte, quick bool) bool {
	if status != 200 {
		return false
	}
	body = bytes.TrimSpace(body)
	if quick && (bytes.HasPrefix(body, oldGranted) || bytes.HasPrefix(body, newGranted)) {
		return true
	}
	a, err := parseAnswer(body)
	return err == nil && a.outcome == "granted"
}

// isReleased: a 200 answer to release that released a lease.
func isReleased(status int, body []byte) bool {
	if status != 200 {
		return false
	}
	body = bytes.TrimSpace(body)
	if bytes.Equal(body, oldReleased) || bytes.Equal(body, newReleased) {
		return true
	}
	a, err := parseAnswer(body)
	return err == nil && a.outcome == "released"
}

// isRenewed: a 200 answer to renew that renewed the lease, recognised by
// its start like a grant (the old tuples' renew answer is decoded).
func isRenewed(status int, body []byte) bool {
	if status != 200 {
		return false
	}
	body = bytes.TrimSpace(body)
	if bytes.HasPrefix(body, newRenewed) {
		return true
	}
	a, err := parseAnswer(body)
	return err == nil && a.outcome == "renewed"
}
