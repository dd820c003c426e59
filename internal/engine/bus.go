package engine

import (
	"sync"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// The event bus of GET /v1/events (docs/api.md, "Events").
//
// Every event goes into one ring, in id order; each reader (a Follower)
// keeps its place in the ring and copies out what it has not read yet. The
// committer (SQLite: this server's commits are all there is) or the
// listener (PostgreSQL: the notifications of every server, this one's
// included, in commit order) only appends and wakes the readers, whatever
// their number and speed, so a slow reader never slows it. A reader that
// falls behind by more than the ring holds is told "overflow"; one that
// resumes from an id the ring no longer holds, or whose events were lost
// (a gap in the ids, a lost notification connection), is told "reset".

// DefaultEventsBuffer is how many recent events a server keeps for readers
// to catch up and resume from (serve --events-buffer).
const DefaultEventsBuffer = 10000

// followBatch bounds what a reader copies out of the ring at once.
const followBatch = 256

// Bus is the ring of recent events.
type Bus struct {
	mu   sync.Mutex
	ring []lk.Event // the event with id i is at i % len(ring)
	// The ring holds every event with an id in (floor, last]; known is
	// false while the ids are unknown (after events were lost, on
	// PostgreSQL, until the listener reads the counter again).
	floor, last int64
	known       bool
	// epoch counts resets: a reader from an earlier epoch is told "reset".
	epoch uint64
	// changed is closed, and replaced, at every change.
	changed chan struct{}
	// closed is closed when the engine drains: readers end.
	closed chan struct{}
	// now is the engine's time, for the controls' At.
	now func() int64
}

func newBus(size int, closed chan struct{}, now func() int64) *Bus {
	if size <= 0 {
		size = DefaultEventsBuffer
	}
	return &Bus{ring: make([]lk.Event, size), changed: make(chan struct{}), closed: closed, now: now}
}

func (b *Bus) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// reset empties the ring: the events up to cursor are the past that
// readers must read afresh (-1: not known yet).
func (b *Bus) reset(cursor int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.resetLocked(cursor)
	b.signal()
}

func (b *Bus) resetLocked(cursor int64) {
	b.epoch++
	b.floor, b.last, b.known = cursor, cursor, cursor >= 0
}

// resync is the listener's news that events may have been missed, cursor
// being the last committed id (-1 when unknown): when the ring already
// ends there, nothing was.
func (b *Bus) resync(cursor int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cursor >= 0 && b.known && cursor == b.last {
		return
	}
	b.resetLocked(cursor)
	b.signal()
}

// add appends events in id order. A repeat (an id already in) is skipped;
// a gap (an id beyond the next) means events were lost: a reset.
func (b *Bus) add(events []service.Event) {
	if len(events) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, se := range events {
		e := se.API()
		switch {
		case !b.known:
			// The first event after a loss: the ring starts here;
			// readers were told when the loss was.
			b.floor, b.last, b.known = e.ID-1, e.ID-1, true
		case e.ID <= b.last:
			continue
		case e.ID != b.last+1:
			b.resetLocked(e.ID - 1)
		}
		b.ring[e.ID%int64(len(b.ring))] = e
		b.last = e.ID
		if b.last-b.floor > int64(len(b.ring)) {
			b.floor = b.last - int64(len(b.ring))
		}
	}
	b.signal()
}

// Closed is closed when the engine drains: every reader should end.
func (b *Bus) Closed() <-chan struct{} { return b.closed }

// Follower is one reader of the bus.
type Follower struct {
	b      *Bus
	epoch  uint64
	cursor int64 // the id of the last event read; -1 while unknown
	batch  []lk.Event
}

// Follow starts a reader after the event with id last (-1: from now on).
// reset is true when it cannot resume there (an id older than the ring,
// from before events were lost, or from another database): its reader must
// read the state again, then gets the events from Cursor on.
func (b *Bus) Follow(last int64) (f *Follower, reset bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f = &Follower{b: b, epoch: b.epoch, cursor: b.last, batch: make([]lk.Event, 0, followBatch)}
	if !b.known {
		f.cursor = -1 // taken from the ring once known
	}
	resume := last < 0 || b.known && last >= b.floor && last <= b.last
	if last >= 0 && resume {
		f.cursor = last
	}
	return f, !resume
}

// Cursor is the id of the last event the reader has had, -1 while unknown.
func (f *Follower) Cursor() int64 { return f.cursor }

// Control is the control event of kind (lk.EventReset, lk.EventOverflow)
// for the reader now: its id is the reader's place (0 while unknown).
func (f *Follower) Control(kind lk.EventKind) lk.Event {
	return lk.Event{ID: max(f.cursor, 0), Kind: kind, At: f.b.now()}
}

// Read returns, without waiting, the next events after the reader's place
// (at most followBatch), or a control: lk.EventReset (events were lost: the
// reader must read the state again; its place is Cursor) or
// lk.EventOverflow (it fell behind the ring and must end). With neither,
// changed is closed when there may be more.
func (f *Follower) Read() (events []lk.Event, control lk.EventKind, changed <-chan struct{}) {
	b := f.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case f.epoch != b.epoch:
		// Events were lost: what came after the loss is in the ring,
		// from its start.
		f.epoch, f.cursor = b.epoch, b.floor
		if !b.known {
			f.cursor = -1
		}
		return nil, lk.EventReset, nil
	case f.cursor < 0 && b.known:
		f.cursor = b.floor
	case b.known && f.cursor < b.floor:
		return nil, lk.EventOverflow, nil
	}
	f.batch = f.batch[:0]
	if b.known {
		for id := f.cursor + 1; id <= b.last && len(f.batch) < followBatch; id++ {
			f.batch = append(f.batch, b.ring[id%int64(len(b.ring))])
		}
	}
	if n := len(f.batch); n > 0 {
		f.cursor = f.batch[n-1].ID
	}
	return f.batch, "", b.changed
}
