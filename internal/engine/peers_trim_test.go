package engine

import (
	"encoding/json"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestTrimToNotification: a deadlock abort whose victim held 100 leases
// on 256-byte locks, in a cycle of 60 clients with 256-byte names, is cut
// to fit a notification: its lists lose their tail, it says so, and what
// identifies it is whole. An event that fits is left alone.
func TestTrimToNotification(t *testing.T) {
	name := func(c string) string { return strings.Repeat(c, 256) }
	victim := name("v")
	e := service.Event{ID: 77, Kind: lk.EventDeadlockAbort, Client: victim, Lock: name("l"), At: 1000, Mode: lk.Exclusive,
		Requester: name("q"), Position: 3, Abort: &lk.Abort{Victim: &victim, Age: 5}}
	for range 60 {
		c := name("c")
		e.Abort.Cycle = append(e.Abort.Cycle, lk.CycleMember{Client: &c, Age: 9, WaitsFor: name("w")})
		e.Cycle = append(e.Cycle, c)
	}
	for range 100 {
		e.Lost = append(e.Lost, lk.Holder{Lock: name("h"), Mode: lk.Shared, Token: 12345, ExpiresAt: 1010})
	}
	const limit = maxPayload - 50
	b, err := trim(toWire(e), limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > limit {
		t.Fatalf("trimmed to %d bytes, over %d", len(b), limit)
	}
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatal(err)
	}
	got := fromWire(w)
	if !got.Truncated || got.ID != e.ID || got.Kind != e.Kind || got.Client != e.Client || got.Lock != e.Lock ||
		got.Mode != e.Mode || got.Requester != e.Requester || got.Position != e.Position || got.Abort == nil || *got.Abort.Victim != victim {
		t.Errorf("trimmed event %+v", got)
	}
	if len(e.Abort.Cycle) != 60 || len(e.Lost) != 100 {
		t.Errorf("trim changed the event it was given")
	}
	// Cut to what fits, not far below.
	if len(b) < limit-1000 {
		t.Errorf("trimmed to %d bytes, far below %d", len(b), limit)
	}
	if got := got.API(); !got.Truncated {
		t.Errorf("API() lost Truncated")
	}
	if a, _ := json.Marshal(got.API()); !strings.Contains(string(a), `"truncated":true`) {
		t.Errorf("the API's JSON has no truncated: %s", a)
	}

	small := service.Event{ID: 1, Kind: lk.EventGrant, Client: "a", Lock: "L", Token: 1, Mode: lk.Exclusive,
		Predecessors: []lk.Predecessor{{Token: 1, Mode: lk.Shared}}}
	b, _ = trim(toWire(small), limit)
	if want, _ := json.Marshal(toWire(small)); string(b) != string(want) {
		t.Errorf("an event that fits became %s, want %s", b, want)
	}
}

// TestSkippedNoticeCursor: a notice that numbered events were too large
// to send tells the listeners where the stream stands, so that their
// readers' reset has an id.
func TestSkippedNoticeCursor(t *testing.T) {
	var p peerLink
	got := int64(-2)
	sink := func(_ []service.Event, resync bool, cursor int64) {
		if resync {
			got = cursor
		}
	}
	p.numbered(notice{Origin: "x", Skipped: true, Cursor: 42}, sink)
	if got != 42 {
		t.Errorf("cursor %d, want 42", got)
	}
	p.numbered(notice{Origin: "x", Skipped: true}, sink) // an older server's
	if got != -1 {
		t.Errorf("cursor %d, want -1", got)
	}
}
