package engine

import (
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestWakeKeepsTheWaitsNews: a blocked acquire hears the events of its own
// lock however many its client has on others (a client holding many locks
// renews them all the time), and learns that it must read the state when
// its news overflowed, instead of sleeping through its grant until the
// wait ran out.
func TestWakeKeepsTheWaitsNews(t *testing.T) {
	s := &waits{subs: map[string][]*subscription{}}
	news, done := s.subscribe("c", "Q")
	defer done()
	var noise []service.Event
	for i := range 40 {
		noise = append(noise, service.Event{Kind: lk.EventRenew, Client: "c", Lock: "L" + string(rune('a'+i%26)), Token: int64(i + 1)})
	}
	s.wake(append(noise, service.Event{Kind: lk.EventQueue, Client: "c", Lock: "Q", Position: 7}))
	select {
	case e := <-news.events:
		if e.Lock != "Q" || e.Kind != lk.EventQueue {
			t.Fatalf("first news of the wait on Q: %+v", e)
		}
	default:
		t.Fatal("the wait's own event was dropped behind the client's other locks' events")
	}
	select {
	case <-news.missed:
		t.Fatal("a wait that dropped nothing was told to read the state")
	default:
	}

	var own []service.Event
	for i := range 40 {
		own = append(own, service.Event{Kind: lk.EventQueue, Client: "c", Lock: "Q", Position: int64(100 + i)})
	}
	s.wake(own)
	select {
	case <-news.missed:
	default:
		t.Fatal("events of the wait were dropped and it was not told to read the state")
	}
}
