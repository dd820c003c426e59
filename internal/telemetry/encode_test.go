package telemetry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// slogLine is the reference appendLine answers to: the line that the
// handler of format JSON (Format.handler, with whatever options it has)
// writes for the record that Audit's slog path would log, at t.
func slogLine(t *testing.T, tm time.Time, msg string, attrs []slog.Attr, group int64) string {
	t.Helper()
	var buf bytes.Buffer
	h := JSON.handler(&buf)
	if !h.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("the JSON handler drops INFO lines, which appendLine writes")
	}
	r := slog.NewRecord(tm, slog.LevelInfo, msg, 0)
	r.AddAttrs(append(attrs[:len(attrs):len(attrs)], slog.Int64("group", group))...)
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestAppendLineMatchesSlog: for random events of every kind, with strings
// full of what JSON escapes (and what it must not), integers of every size
// and times in every zone, the line appendLine writes is, byte for byte,
// the one slog's handler writes; and it declines only the lines it is
// meant to leave to slog.
func TestAppendLineMatchesSlog(t *testing.T) {
	if !JSON.direct() || Text.direct() {
		t.Fatalf("direct: JSON %v, Text %v; want only JSON's lines by hand", JSON.direct(), Text.direct())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tel := New(nil, nil, Options{Principals: true})
	kinds := []lk.EventKind{lk.EventGrant, lk.EventLapse, lk.EventRelease, lk.EventWithdraw, lk.EventRevoke,
		lk.EventDeadlockAbort, lk.EventStaleWrite, lk.EventFenceStale, lk.EventUnfence, lk.EventRenew, lk.EventQueue}
	seen := map[string]int{}
	for i := range 20000 {
		e := randomEvent(rng, kinds[i%len(kinds)])
		tel.Acted(randomString(rng), e.Client)
		tel.principals = rng.IntN(2) == 0
		msg, attrs := tel.eventLine(e, nil)
		if msg == "" {
			continue
		}
		tm := randomTime(rng)
		group := randomInt(rng)
		want := slogLine(t, tm, msg, attrs, group)
		prefix := []byte("earlier lines\n")
		got, ok := appendLine(prefix, tm, msg, attrs, group)
		if !bytes.HasPrefix(got, []byte("earlier lines\n")) {
			t.Fatalf("appendLine changed what b held before: %q", got)
		}
		switch {
		case !ok && msg == "deadlock_abort":
			seen["declined "+msg]++
		case !ok && strings.Contains(want, `"time":"!ERROR:`):
			seen["declined year"]++
		case !ok:
			t.Fatalf("appendLine declined a line it should write:\n%s", want)
		case string(got[len(prefix):]) != want:
			t.Fatalf("appendLine and slog differ on %s at %v:\nappendLine %q\nslog       %q",
				msg, tm, got[len(prefix):], want)
		default:
			seen[msg]++
		}
		if !ok && string(got) != string(prefix) {
			t.Fatalf("appendLine declined, leaving %q", got)
		}
	}
	for _, k := range []string{"grant", "lapse", "release", "withdraw", "revoke", "stale_write", "fence_stale",
		"unfence", "declined deadlock_abort", "declined year"} {
		if seen[k] == 0 {
			t.Errorf("no %s among the random lines: %v", k, seen)
		}
	}
}

// TestAppendLineAnyKeys: keys and messages are escaped as slog escapes
// them too, though Audit's are plain words.
func TestAppendLineAnyKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var attrs []slog.Attr
		for range rng.IntN(6) {
			if rng.IntN(2) == 0 {
				attrs = append(attrs, slog.String(randomString(rng), randomString(rng)))
			} else {
				attrs = append(attrs, slog.Int64(randomString(rng), randomInt(rng)))
			}
		}
		msg, tm, group := randomString(rng), randomTime(rng), randomInt(rng)
		want := slogLine(t, tm, msg, attrs, group)
		got, ok := appendLine(nil, tm, msg, attrs, group)
		if ok && string(got) != want {
			t.Fatalf("appendLine and slog differ:\nappendLine %q\nslog       %q", got, want)
		}
		if !ok && !strings.Contains(want, `"time":"!ERROR:`) {
			t.Fatalf("appendLine declined %q", want)
		}
	}
}

// TestAuditDirectMatchesSlog: whole groups, some with a deadlock abort
// that slog writes amid the lines written by hand, come out of Audit the
// same either way but for the times of their lines.
func TestAuditDirectMatchesSlog(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	kinds := []lk.EventKind{lk.EventGrant, lk.EventLapse, lk.EventRelease, lk.EventWithdraw, lk.EventRevoke,
		lk.EventDeadlockAbort, lk.EventStaleWrite, lk.EventFenceStale, lk.EventUnfence, lk.EventRenew, lk.EventQueue}
	var direct, viaSlog bytes.Buffer
	d := New(&direct, nil, Options{Principals: true})
	s := New(&viaSlog, nil, Options{Principals: true})
	s.ahead.direct = false
	for range 500 {
		var events []service.Event
		for range rng.IntN(30) {
			events = append(events, randomEvent(rng, kinds[rng.IntN(len(kinds))]))
		}
		for _, tel := range []*Telemetry{d, s} {
			for _, e := range events {
				tel.Acted(e.Client, e.Client)
			}
			tel.Audit(events)
		}
	}
	times := regexp.MustCompile(`(?m)^\{"time":"[^"]*",`)
	got := times.ReplaceAllString(direct.String(), "{")
	want := times.ReplaceAllString(viaSlog.String(), "{")
	if got != want {
		g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Fatalf("line %d:\ndirect %q\nslog   %q", i+1, g[i], w[i])
			}
		}
		t.Fatalf("direct wrote %d lines, slog %d", len(g), len(w))
	}
	if !strings.Contains(got, `"msg":"deadlock_abort"`) || !strings.Contains(got, `"msg":"grant"`) {
		t.Fatalf("the groups lack deadlock aborts or grants:\n%.2000s", got)
	}
}

func randomEvent(rng *rand.Rand, kind lk.EventKind) service.Event {
	e := service.Event{Kind: kind, Client: randomString(rng), Lock: randomString(rng), Mode: lk.Mode(randomString(rng)),
		At: randomInt(rng), Token: randomInt(rng), ExpiresAt: randomInt(rng), FromQueue: rng.IntN(2) == 0,
		Requester: randomString(rng), Highest: randomInt(rng), Resource: randomString(rng), Position: randomInt(rng)}
	if rng.IntN(3) == 0 {
		e.By = randomString(rng)
	}
	if rng.IntN(4) == 0 {
		e.Lock, e.Position = "", 0 // a deadlock abort's requester that never queued
	}
	for range rng.IntN(3) {
		e.Lost = append(e.Lost, lk.Holder{Lock: randomString(rng), Mode: lk.Shared, Token: randomInt(rng)})
		e.Cycle = append(e.Cycle, randomString(rng))
	}
	return e
}

// randomString strings together pieces of what JSON escapes, or must not:
// quotes, backslashes, control characters, <, > and &, U+2028 and U+2029,
// other runes of every length, and bytes that are not UTF-8, among them
// U+2028 cut short and an encoded surrogate.
func randomString(rng *rand.Rand) string {
	pieces := []string{"a", "lock-17", "worker/3", " ", `"`, `\`, `\"`, "\x00", "\x01", "\b", "\t", "\n", "\f",
		"\r", "\x1b", "\x1f", "\x7f", "<", ">", "&", "</script>", "\u2028", "\u2029", "\u2027", "\u202a", "é",
		"日本", "😀", "\ufffd", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80abc", "'", "/"}
	var b strings.Builder
	for range rng.IntN(8) {
		if rng.IntN(4) == 0 {
			b.WriteByte(byte(rng.IntN(256)))
		} else {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
	}
	return b.String()
}

func randomInt(rng *rand.Rand) int64 {
	switch rng.IntN(6) {
	case 0:
		return []int64{0, 1, -1, 9, 10, -10, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}[rng.IntN(9)]
	case 1:
		return rng.Int64N(1000)
	case 2:
		return -rng.Int64N(1 << 40)
	case 3:
		return -rng.Int64()
	default:
		return rng.Int64()
	}
}

// randomTime is a time in one of many zones, now and then with whole
// seconds or milliseconds (the trailing zeros that RFC 3339 with
// nanoseconds trims), zero, or of a year not of four digits.
func randomTime(rng *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 0), time.FixedZone("NPT", 5*3600+45*60),
		time.FixedZone("", -(3*3600 + 30*60)), time.FixedZone("", 14*3600), time.FixedZone("", -12*3600),
		time.FixedZone("LMT", -(4*3600 + 56*60 + 2))}
	var tm time.Time
	switch rng.IntN(10) {
	case 0:
		return time.Time{}
	case 1: // years before 0 and after 9999
		tm = time.Date(-2000+rng.IntN(13000), 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(365 * 24 * time.Hour))))
	case 2: // either side of year 10000 and of year 0, in some zone
		tm = time.Date([]int{0, 10000}[rng.IntN(2)], 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(48*time.Hour))) - 24*time.Hour)
	case 3:
		tm = time.Now()
	default:
		tm = time.Unix(rng.Int64N(1<<35)-1<<34, rng.Int64N(1e9))
	}
	switch rng.IntN(4) {
	case 0:
		tm = tm.Truncate(time.Second)
	case 1:
		tm = tm.Truncate(time.Millisecond)
	}
	return tm.In(zones[rng.IntN(len(zones))])
}

// BenchmarkAudit: a group of 11 grants and 11 releases, as Audit writes it
// by hand and as slog writes it.
func BenchmarkAudit(b *testing.B) {
	var events []service.Event
	for i := range 11 {
		events = append(events,
			service.Event{Kind: lk.EventRelease, Lock: fmt.Sprintf("jobs/%d", i), Client: fmt.Sprintf("worker-%d", i),
				Mode: lk.Exclusive, Token: int64(1000 + i), At: 1767225600123},
			service.Event{Kind: lk.EventGrant, Lock: fmt.Sprintf("jobs/%d", i), Client: fmt.Sprintf("worker-%d", i+11),
				Mode: lk.Exclusive, Token: int64(2000 + i), At: 1767225600123, ExpiresAt: 1767225630123, FromQueue: i%2 == 0})
	}
	for _, direct := range []bool{true, false} {
		name := "slog"
		if direct {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			tel := New(io.Discard, nil, Options{})
			tel.ahead.direct = direct
			b.ReportAllocs()
			for b.Loop() {
				tel.Audit(events)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/group")
		})
	}
}
