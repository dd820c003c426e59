package server

import (
	"strconv"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/jsonenc"
)

// The answers nearly every request gets, a grant without victims and a
// release, are written by hand rather than by encoding/json's reflection:
// at 64 clients the server's CPU is the bound, and encoding them took
// some 4 % of it (docs/performance.md, "The answers of acquire and
// release without reflection"). appendAnswer writes exactly the bytes
// encoding/json writes for them, with its newline (FuzzAnswersJSON holds
// it to them); it declines every other answer.
func appendAnswer(b []byte, v any) ([]byte, bool) {
	switch r := v.(type) {
	case lk.AcquireResult:
		if r.Outcome != lk.Granted || len(r.Victims) > 0 {
			return b, false
		}
		b = append(b, `{"outcome":`...)
		b = jsonenc.String(b, string(r.Outcome))
		b = append(b, `,"token":`...)
		b = strconv.AppendInt(b, r.Token, 10)
		b = append(b, `,"granted_at":`...)
		b = strconv.AppendInt(b, r.GrantedAt, 10)
		b = append(b, `,"expires_at":`...)
		b = strconv.AppendInt(b, r.ExpiresAt, 10)
		if len(r.Predecessors) > 0 {
			b = append(b, `,"predecessors":[`...)
			for i, p := range r.Predecessors {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"client":`...)
				if p.Client == nil {
					b = append(b, "null"...)
				} else {
					b = jsonenc.String(b, *p.Client)
				}
				b = append(b, `,"token":`...)
				b = strconv.AppendInt(b, p.Token, 10)
				b = append(b, `,"mode":`...)
				b = jsonenc.String(b, string(p.Mode))
				b = append(b, `,"ended":`...)
				b = jsonenc.String(b, string(p.Ended))
				b = append(b, `,"ended_at":`...)
				b = strconv.AppendInt(b, p.EndedAt, 10)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		return append(b, "}\n"...), true
	case lk.ReleaseResult:
		b = append(b, `{"outcome":`...)
		b = jsonenc.String(b, string(r.Outcome))
		return append(b, "}\n"...), true
	}
	return b, false
}
