// Package jsonenc appends JSON strings byte for byte as the standard
// library writes them, for the encoders written by hand where reflection
// cost too much (the audit lines, the answers of acquire and release).
package jsonenc

import "unicode/utf8"

// String appends s as encoding/json writes a string with HTML escaping
// off: \b, \f, \n, \r and \t short, other control bytes as \u00XX, invalid
// UTF-8 as \ufffd byte by byte, U+2028 and U+2029 (which end a line in
// JavaScript) escaped, <, > and & left be.
func String(b []byte, s string) []byte { return appendString(b, s, true) }

// SlogString appends s as log/slog's JSON handler writes the strings it
// writes itself (keys, the message, string values): as String, but for
// \b and \f, which it writes as \u0008 and \u000c where encoding/json,
// since Go 1.22, writes \b and \f.
func SlogString(b []byte, s string) []byte { return appendString(b, s, false) }

func appendString(b []byte, s string, shortBF bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch {
			case c == '"', c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\r':
				b = append(b, `\r`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c == '\b' && shortBF:
				b = append(b, `\b`...)
			case c == '\f' && shortBF:
				b = append(b, `\f`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"
