package server

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Names are text: the server refuses one that is not valid UTF-8, rather
// than let encoding/json turn its bad bytes, or a \u escape of a lone
// surrogate ("\ud800"), into U+FFFD, which would make two different names
// the same lock. (The contract allows any string; `leasekeeper run` does.)

// badTextFields returns the top-level fields of a JSON object, body, whose
// string value is not valid UTF-8 once decoded: invalid bytes, or an
// unpaired surrogate escape. body must be a valid JSON object.
func badTextFields(body []byte) map[string]bool {
	if utf8.Valid(body) && !hasSurrogateEscape(body) {
		return nil // the common case: one pass over the bytes
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(body, &raw) != nil {
		return nil
	}
	var bad map[string]bool
	for k, v := range raw {
		if len(v) > 0 && v[0] == '"' && !validJSONText(v) {
			if bad == nil {
				bad = map[string]bool{}
			}
			bad[k] = true
		}
	}
	return bad
}

// hasSurrogateEscape reports whether b may hold a \u escape of a surrogate
// (\uD800 to \uDFFF), paired or not.
func hasSurrogateEscape(b []byte) bool {
	for {
		i := bytes.Index(b, []byte(`\u`))
		if i < 0 || i+3 >= len(b) {
			return false
		}
		if c := b[i+2]; (c == 'd' || c == 'D') && bytes.IndexByte([]byte("89abcdefABCDEF"), b[i+3]) >= 0 {
			return true
		}
		b = b[i+2:]
	}
}

// validJSONText reports whether lit, a valid JSON string literal, decodes
// to valid UTF-8 as written: its bytes are UTF-8, and each surrogate escape
// is a high one followed by a low one.
func validJSONText(lit []byte) bool {
	if !utf8.Valid(lit) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++ // the escaped character: '\\' is skipped with it
		if i >= len(lit) || lit[i] != 'u' {
			continue
		}
		r, ok := hex4(lit[i+1:])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return false // a low surrogate first
		case r >= 0xD800 && r <= 0xDBFF:
			if i+6 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(lit[i+3:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
