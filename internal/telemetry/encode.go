package telemetry

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/jsonenc"
)

// The lines of a transaction are encoded by the committer, the one
// goroutine every operation of the server waits on, ahead of each COMMIT.
// Through slog, a line cost allocations, the caller's program counter
// (wanted only for AddSource), a pooled buffer and a copy out of it: some
// 5% of the committer's time at 64 clients. appendLine writes the
// same bytes straight into the group's buffer instead.
//
// It must write exactly what slog's JSON handler, with the options
// Format.handler gives it (none), writes: the lines are read back (Recover,
// and whoever reads the log), and a line that differed between a run that
// took one path and a run that took the other would be a change of format
// no one asked for. TestAppendLineMatchesSlog holds it to that, against the
// handler itself, for random events of every kind.

// appendLine appends to b the line slog's JSON handler writes for a record
// of level INFO at t with message msg and attributes attrs, followed by
// the attribute "group". It knows strings and integers, all the values of
// the common lines (grants, releases, lapses, withdrawals, revocations,
// refused stale writes and tokens, unfences): for any other value, such as
// a deadlock abort's lists, which slog hands to encoding/json, escaping
// them by rules of its own, it reports false with b as it was, and the
// line is slog's to write. So it does for a time whose year is not of four
// digits, which slog's handler marks with an error of its own before the
// time.
func appendLine(b []byte, t time.Time, msg string, attrs []slog.Attr, group int64) ([]byte, bool) {
	n := len(b)
	b = append(b, '{')
	if !t.IsZero() { // slog's handler leaves out a zero time, key and all
		b = append(b, `"time":"`...)
		year := len(b)
		// The layout of time.Time's MarshalJSON, which slog's handler
		// copies: RFC 3339 with nanoseconds, trailing zeros trimmed, in
		// t's own location.
		b = t.AppendFormat(b, time.RFC3339Nano)
		if b[year+4] != '-' {
			// A negative year or one past 9999: a sign or a fifth
			// digit stands where a four-digit year ends.
			return b[:n], false
		}
		b = append(b, `",`...)
	}
	b = append(b, `"level":"INFO","msg":`...)
	b = appendString(b, msg)
	for _, a := range attrs {
		b = append(b, ',')
		b = appendString(b, a.Key)
		b = append(b, ':')
		switch a.Value.Kind() {
		case slog.KindString:
			b = appendString(b, a.Value.String())
		case slog.KindInt64:
			b = strconv.AppendInt(b, a.Value.Int64(), 10)
		default:
			return b[:n], false
		}
	}
	b = append(b, `,"group":`...)
	b = strconv.AppendInt(b, group, 10)
	return append(b, "}\n"...), true
}

// appendString appends s as slog's JSON handler writes the strings it
// writes itself.
func appendString(b []byte, s string) []byte { return jsonenc.SlogString(b, s) }
