package server

import "encoding/json"

// flatObject reads the bodies nearly every request sends, a flat JSON
// object of ASCII strings without escapes and of integers, such as
// {"client":"c0","lock":"L","ttl":30}, into what encoding/json's decoder
// with UseNumber makes of them: a map of strings and json.Numbers. It
// gives up (ok false) on anything else, which body then decodes through
// encoding/json as before; FuzzFlatObject holds every object it reads to
// encoding/json's reading of it. At 64 clients the server's CPU is the
// bound, and the generic decoding took some 3 % of it
// (docs/performance.md, "The answers of acquire and release without
// reflection").
func flatObject(raw []byte) (m map[string]any, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	m = make(map[string]any, 4)
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return end(raw, i+1, m)
	}
	for {
		key, j, ok := plainString(raw, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, j)
		if i >= len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		if i >= len(raw) {
			return nil, false
		}
		if raw[i] == '"' {
			var s string
			if s, i, ok = plainString(raw, i); !ok {
				return nil, false
			}
			m[key] = s
		} else {
			var n string
			if n, i, ok = integer(raw, i); !ok {
				return nil, false
			}
			m[key] = json.Number(n)
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return end(raw, i+1, m)
		default:
			return nil, false
		}
	}
}

// end returns m if nothing but white space follows the object, which
// ends before b[i].
func end(b []byte, i int, m map[string]any) (map[string]any, bool) {
	if skipSpace(b, i) != len(b) {
		return nil, false
	}
	return m, true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON's white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string at b[i], which must be of printable ASCII
// without a backslash, and returns it and the index after its closing
// quote.
func plainString(b []byte, i int) (s string, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c < ' ' || c > '~' || c == '\\':
			return "", 0, false
		}
	}
	return "", 0, false
}

// integer reads the JSON integer at b[i] (-?(0|[1-9][0-9]*), not followed by
// a fraction or an exponent) and returns its text and the index after it.
func integer(b []byte, i int) (n string, next int, ok bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	switch {
	case j == start, b[start] == '0' && j > start+1:
		return "", 0, false
	case j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E'):
		return "", 0, false
	}
	return string(b[i:j]), j, true
}
