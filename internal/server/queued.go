package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// QueueBounder is an Authorizer that also bounds how many clients of a
// principal may stand in queues at once, blocked or not: a `wait: 0`
// acquire that queues leaves an entry that costs every later enqueue and
// grant, and max_waiting, which counts blocked acquires only, does not see
// it. QueuedLimit returns the principal of r and its bound, 0 for none.
type QueueBounder interface {
	QueuedLimit(r *http.Request) (principal string, limit int)
}

// queuePruneEvery is how often at most a principal at its bound has its
// entries looked up again (one status read each): a refused acquire costs
// nothing more within it.
const queuePruneEvery = time.Second

// queuedSet is one principal's clients that this server saw queued, or
// whose acquire is running.
type queuedSet struct {
	clients  map[string]int // client id → acquires of it running now
	prunedAt time.Time
}

// queued is the server's record of each bounded principal's queued
// clients. It is this server's: entries queued through another server, or
// before a restart, are not counted, and it learns that an entry left the
// queue (granted, withdrawn, aborted) by looking its client up when the
// principal is at its bound.
type queued struct {
	mu  sync.Mutex
	set map[string]*queuedSet
}

// admitQueued takes a place of the principal's max_queued for client's
// acquire, or answers 429 itself. done, called once with the acquire's
// answer, keeps the place while the client stays queued and frees it
// otherwise.
func (s *Server) admitQueued(w http.ResponseWriter, r *http.Request, client string) (done func(res lk.AcquireResult, err error), ok bool) {
	qb, is := s.auth.(QueueBounder)
	if !is {
		return func(lk.AcquireResult, error) {}, true
	}
	principal, limit := qb.QueuedLimit(r)
	if limit <= 0 {
		return func(lk.AcquireResult, error) {}, true
	}
	q := &s.queued
	q.mu.Lock()
	if q.set == nil {
		q.set = map[string]*queuedSet{}
	}
	set := q.set[principal]
	if set == nil {
		set = &queuedSet{clients: map[string]int{}}
		q.set[principal] = set
	}
	_, known := set.clients[client]
	if !known && len(set.clients) >= limit && time.Since(set.prunedAt) >= queuePruneEvery {
		set.prunedAt = time.Now()
		var idle []string
		for c, running := range set.clients {
			if running == 0 {
				idle = append(idle, c)
			}
		}
		q.mu.Unlock()
		var gone []string
		for _, c := range idle {
			if !s.stillQueued(r.Context(), c) {
				gone = append(gone, c)
			}
		}
		q.mu.Lock()
		for _, c := range gone {
			if set.clients[c] == 0 {
				delete(set.clients, c)
			}
		}
		_, known = set.clients[client]
	}
	if !known && len(set.clients) >= limit {
		n := len(set.clients)
		q.mu.Unlock()
		s.deny(w, r, Access{Op: "acquire", Client: client}, &Denial{Code: lk.CodeRateLimited, RetryAfter: queuePruneEvery, Principal: principal,
			Message: fmt.Sprintf("principal %s has %d clients queued on this server, its max_queued; release (withdraw) one, or retry once one is granted", principal, n)})
		return nil, false
	}
	set.clients[client]++
	q.mu.Unlock()
	var once sync.Once
	return func(res lk.AcquireResult, err error) {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			set.clients[client]--
			// An error's outcome is unknown: the entry stays until a
			// look-up finds it gone.
			if err == nil && res.Outcome != lk.Queued && set.clients[client] == 0 {
				delete(set.clients, client)
			}
		})
	}, true
}

// stillQueued reports whether client waits in a queue now; on an error, yes.
func (s *Server) stillQueued(ctx context.Context, client string) bool {
	st, err := s.eng.Status(ctx, lk.StatusRequest{Client: client, Limit: 1, WithoutPosition: true})
	return err != nil || st.Waiting != nil
}
