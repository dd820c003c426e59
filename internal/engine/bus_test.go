package engine

import (
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

func granted(ids ...int64) []service.Event {
	var out []service.Event
	for _, id := range ids {
		out = append(out, service.Event{ID: id, Kind: lk.EventGrant, Client: "c", Lock: "L", Token: id})
	}
	return out
}

// TestBusLosses: what the listener of a server with PostgreSQL peers hears
// becomes the ring's events, and every loss a reset (a new epoch): a gap
// in the ids, a resync whose cursor is not where the ring ends, an event
// too large to send; a repeat is skipped, and a resync that finds nothing
// missed changes nothing.
func TestBusLosses(t *testing.T) {
	h := newBus(4, nil, nil)
	h.reset(-1) // starting: not listening yet
	state := func() (uint64, int64, int64, bool) { return h.epoch, h.floor, h.last, h.known }
	check := func(what string, epoch uint64, floor, last int64, known bool) {
		t.Helper()
		if e, f, l, k := state(); e != epoch || f != floor || l != last || k != known {
			t.Errorf("%s: epoch %d, ring (%d, %d], known %v; want epoch %d, (%d, %d], %v", what, e, f, l, k, epoch, floor, last, known)
		}
	}
	check("starting", 1, -1, -1, false)
	h.resync(10) // listening: 10 events before
	check("listening", 2, 10, 10, true)
	h.add(granted(9, 10, 11, 12)) // 9 and 10 were committed before: repeats
	check("after 11 and 12", 2, 10, 12, true)
	h.resync(12) // reconnected; nothing was committed meanwhile
	check("a resync that missed nothing", 2, 10, 12, true)
	h.add(granted(15)) // 13 and 14 lost
	check("a gap", 3, 14, 15, true)
	h.add(granted(16, 17, 18, 19, 20))
	check("beyond the ring", 3, 16, 20, true)
	if e := h.ring[17%4]; e.ID != 17 || e.Kind != "grant" || e.Token != 17 {
		t.Errorf("the ring holds %+v for 17", e)
	}
	h.resync(25) // reconnected after 21..25 were committed
	check("a resync after losses", 4, 25, 25, true)
	h.resync(-1) // a notification too large: lost, id unknown
	check("an event too large", 5, -1, -1, false)
	h.add(granted(27))
	check("the first event after it", 5, 26, 27, true)
}
