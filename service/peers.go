package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Several servers on one PostgreSQL database: each transaction tells the
// others what it did to waiting clients through a notification, sent in the
// transaction (so delivered only if it commits, and after it commits), and
// each service listens for the others' (Listen).

// maxPayload bounds a notification's payload: PostgreSQL refuses 8000 bytes
// or more.
const maxPayload = 7900

// HasPeers reports whether other servers may use the database too
// (PostgreSQL): its peers. Then every transaction first takes the lock that
// serializes them all, and what this service caches is read afresh.
func (s *Service) HasPeers() bool { return s.peers }

// DatabaseTime returns the database's clock (Unix seconds, with a fraction)
// as read when the open Group took its lock, on a database with peers; ok is
// false otherwise. A server running on a database with peers takes its time from
// here, so that servers with skewed clocks agree.
func (s *Service) DatabaseTime() (t float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dbNow, s.peers && s.group != nil
}

func newOrigin() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// notice is the notification payload: who sent it and what happened, or
// (Recheck) that something happened too large to tell in a notification.
type notice struct {
	Origin  string      `json:"o"`
	Events  []wireEvent `json:"e,omitempty"`
	Recheck bool        `json:"r,omitempty"`
	// Skipped: a numbered event was too large to send (OnEvents).
	Skipped bool `json:"s,omitempty"`
	// Cursor, with Skipped: the transaction's last event id, where the
	// readers who missed its events stand.
	Cursor int64 `json:"u,omitempty"`
}

// wireEvent is the part of an Event another server needs: whom to wake and
// with what, and when the new lease ends (for its lapse timer).
type wireEvent struct {
	Kind      EventKind `json:"k"`
	Client    string    `json:"c"`
	Lock      string    `json:"l"`
	At        int64     `json:"a,omitempty"`
	Token     int64     `json:"t,omitempty"`
	ExpiresAt int64     `json:"x,omitempty"`
	FromQueue bool      `json:"q,omitempty"`
	Position  int64     `json:"p,omitempty"`
	// The rest is for GET /v1/events (OnEvents).
	ID           int64            `json:"i,omitempty"`
	Mode         lk.Mode          `json:"m,omitempty"`
	Cycle        []string         `json:"y,omitempty"`
	Requester    string           `json:"rq,omitempty"`
	Lost         []lk.Hold        `json:"h,omitempty"`
	Highest      int64            `json:"g,omitempty"`
	By           string           `json:"b,omitempty"`
	Predecessors []lk.Predecessor `json:"d,omitempty"`
	Abort        *lk.Abort        `json:"ab,omitempty"`
	Truncated    bool             `json:"tr,omitempty"`
}

// publish sends the events of the transaction that waiting clients and lapse
// timers elsewhere care about, in notifications of at most maxPayload bytes.
// An event too large for one loses the tail of its explanation (trim);
// one still too large is replaced by a Recheck notice (and for
// GET /v1/events, a reset). Called just before the commit.
func (s *Service) publish(tx *repo.Tx) error {
	if !s.peers {
		return nil
	}
	head := `{"o":"` + s.origin + `","e":[`
	var b strings.Builder
	recheck, skipped := false, false
	// Every transaction with numbered events sends a notification (of
	// them, or that they were too large): its first writes the counter.
	counterWritten := len(s.events) == 0
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		payload := head + b.String() + "]}"
		b.Reset()
		return s.notify(tx, payload, &counterWritten)
	}
	for _, e := range s.events {
		// Renewed: a renew may shorten a lease, and the other servers'
		// lapse timers must not wait for the old end (peerKind). With
		// numbered events, every event goes, for every server's
		// subscribers (OnEvents).
		if !peerKind(e.Kind) && !s.eventIDs {
			continue
		}
		one, err := trim(toWire(e), maxPayload-len(head)-2)
		if err != nil {
			return err
		}
		if len(head)+len(one)+2 > maxPayload {
			recheck = recheck || peerKind(e.Kind)
			skipped = skipped || s.eventIDs
			continue
		}
		if len(head)+b.Len()+1+len(one)+2 > maxPayload {
			if err := flush(); err != nil {
				return err
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.Write(one)
	}
	if err := flush(); err != nil {
		return err
	}
	if recheck || skipped {
		n := notice{Origin: s.origin, Recheck: recheck, Skipped: skipped}
		if skipped {
			n.Cursor = s.c.EventID
		}
		p, _ := json.Marshal(n)
		return s.notify(tx, string(p), &counterWritten)
	}
	return nil
}

// trim returns w's JSON, of at most limit bytes if it can: an event
// whose explanation (a grant's predecessors, an abort's cycle, a victim's
// lost leases: with 256-byte names, a few dozen of them fill a
// notification) makes it longer loses the tail of those lists but their
// first entries, and says so (Truncated). What identifies the event, its
// lock, client, token and mode, is never cut; an event still too large is
// returned so.
func trim(w wireEvent, limit int) ([]byte, error) {
	one, err := json.Marshal(w)
	if err != nil || len(one) <= limit {
		return one, err
	}
	w.Truncated = true
	excess := len(one) + len(`,"tr":true`) - limit
	w.Predecessors, excess = cut(w.Predecessors, excess)
	if w.Abort != nil {
		a := *w.Abort
		a.Cycle, excess = cut(a.Cycle, excess)
		w.Abort = &a
	}
	w.Cycle, excess = cut(w.Cycle, excess)
	w.Lost, _ = cut(w.Lost, excess)
	return json.Marshal(w)
}

// cut drops elements from the end of s, keeping the first, until their
// JSON, commas included, made up excess bytes, and returns what is left of
// s and of excess. One is kept as the API's lists are never empty; with
// names of at most 256 bytes, one of each list fits.
func cut[T any](s []T, excess int) ([]T, int) {
	for len(s) > 1 && excess > 0 {
		b, _ := json.Marshal(s[len(s)-1])
		excess -= len(b) + 1
		s = s[:len(s)-1]
	}
	return s, excess
}

// Listen passes fn the events that other processes' committed transactions
// caused, until ctx ends; on a database without peers it returns at
// once. Each time it starts listening, first and after a lost connection,
// it calls fn with resync set: notifications may have been missed, so the
// caller must check the state of what it waits for.
func (s *Service) Listen(ctx context.Context, fn func(events []Event, resync bool)) error {
	if !s.peers {
		return nil
	}
	resync := func() {
		s.mu.Lock()
		s.nextExpiry = math.MinInt64
		s.mu.Unlock()
		fn(nil, true)
	}
	s.mu.Lock()
	sink := s.eventSink
	s.mu.Unlock()
	ready := func() {
		resync()
		s.eventsResync(ctx, sink)
	}
	return s.db.Listen(ctx, ready, func(payload string) {
		var n notice
		if json.Unmarshal([]byte(payload), &n) != nil {
			return
		}
		s.eventsHeard(n, sink) // this server's own too
		if n.Origin == s.origin {
			return
		}
		if n.Recheck {
			resync()
			return
		}
		events := make([]Event, 0, len(n.Events))
		s.mu.Lock()
		for _, w := range n.Events {
			if !peerKind(w.Kind) {
				continue // for GET /v1/events only (OnEvents)
			}
			events = append(events, fromWire(w))
			if w.Kind == EventGranted || w.Kind == EventRenewed {
				s.noteExpiry(w.ExpiresAt)
			}
		}
		s.mu.Unlock()
		fn(events, false)
	})
}

// batchOps is how many operations a Batch runs per transaction: enough to
// spread a transaction's round trips thin, few enough that rows written by
// every operation (a busy lock's) keep short version chains.
const batchOps = 64

// Batch runs fn, which runs operations and calls step after each, in
// transactions of batchOps operations, when the database has peers and no
// Group is open; otherwise step does nothing, and each operation has its own
// transaction as usual. On PostgreSQL a transaction costs several round
// trips beyond its operation's own, which a replay of many operations need
// not pay each time; on SQLite a transaction costs about what a savepoint
// does. Each transaction commits before the next begins, so a failure loses
// at most the operations of the last one.
func (s *Service) Batch(ctx context.Context, fn func(step func() error) error) error {
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	plain := !s.peers || s.group != nil
	s.mu.Unlock()
	if plain {
		return fn(func() error { return nil })
	}
	if err := s.openGroup(ctx); err != nil {
		return err
	}
	n := 0
	err := fn(func() error {
		if n++; n < batchOps {
			return nil
		}
		n = 0
		if err := s.closeGroup(true); err != nil {
			return err
		}
		return s.openGroup(ctx)
	})
	if cerr := s.closeGroup(err == nil); err == nil {
		err = cerr
	}
	return err
}
