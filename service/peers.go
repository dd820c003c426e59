package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"

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
}

// publish sends the events of the transaction that waiting clients and lapse
// timers elsewhere care about, in notifications of at most maxPayload bytes.
// An event too large for one (names are not bounded here) is replaced by a
// Recheck notice. Called just before the commit.
func (s *Service) publish(tx *repo.Tx) error {
	if !s.peers {
		return nil
	}
	head := `{"o":"` + s.origin + `","e":[`
	var b strings.Builder
	recheck := false
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		payload := head + b.String() + "]}"
		b.Reset()
		return repo.Notify(tx, payload)
	}
	for _, e := range s.events {
		switch e.Kind {
		case EventGranted, EventAborted, EventWithdrawn, EventRenewed:
			// Renewed: a renew may shorten a lease, and the other
			// servers' lapse timers must not wait for the old end.
		default:
			continue
		}
		one, err := json.Marshal(wireEvent{Kind: e.Kind, Client: e.Client, Lock: e.Lock, At: e.At,
			Token: e.Token, ExpiresAt: e.ExpiresAt, FromQueue: e.FromQueue, Position: e.Position})
		if err != nil {
			return err
		}
		if len(head)+len(one)+2 > maxPayload {
			recheck = true
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
	if recheck {
		p, _ := json.Marshal(notice{Origin: s.origin, Recheck: true})
		return repo.Notify(tx, string(p))
	}
	return nil
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
	return s.db.Listen(ctx, resync, func(payload string) {
		var n notice
		if json.Unmarshal([]byte(payload), &n) != nil || n.Origin == s.origin {
			return
		}
		if n.Recheck {
			resync()
			return
		}
		events := make([]Event, len(n.Events))
		s.mu.Lock()
		for i, w := range n.Events {
			events[i] = Event{Kind: w.Kind, Client: w.Client, Lock: w.Lock, At: w.At,
				Token: w.Token, ExpiresAt: w.ExpiresAt, FromQueue: w.FromQueue, Position: w.Position}
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
