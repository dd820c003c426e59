package model

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// asInteger implements the contract's "integer" (rule 3, contract-notes): a
// JSON number token without '.', 'e' or 'E' that fits in a signed 64-bit
// integer. Booleans, strings, 5.0 and 1e3 are not integers; -0 is 0.
func asInteger(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return i, true
}

// asName is rule 7's type check for client, lock, key and value: a non-empty
// string.
func asName(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && s != ""
}

// asMode is rule 7's type check for mode: exactly "shared" or "exclusive".
func asMode(v any) (string, bool) {
	s, ok := v.(string)
	if ok && (s == modeShared || s == modeExclusive) {
		return s, true
	}
	return "", false
}

// asToken is rule 7's type check for a write's token: an integer >= 1 (a
// type check, so a token of 0 is "invalid arguments", not a range error).
func asToken(v any) (int64, bool) {
	t, ok := asInteger(v)
	return t, ok && t >= 1
}

// ttlInRange is rule 8, the only range check: 1..86400.
func ttlInRange(ttl int64) bool {
	return ttl >= 1 && ttl <= 86400
}

// expiry is L2's expires_at = start + ttl, saturating at the largest int64
// instead of overflowing (contract-notes, "Times saturate"). ttl is always
// positive here, so only the upper bound can be crossed.
func expiry(start, ttl int64) int64 {
	if start > math.MaxInt64-ttl {
		return math.MaxInt64
	}
	return start + ttl
}
