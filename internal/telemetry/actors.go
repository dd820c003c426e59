package telemetry

import "sync"

// actorsKept bounds how many client ids the server remembers the principal
// of: the last actorsKept to 2*actorsKept client ids that acted.
const actorsKept = 1 << 16

// actors remembers which principal last acted as each client id (acquire,
// renew, release) on this server since it started, so that the audit line
// of a deadlock abort can name the victim's principal as well as the
// requester's. Two generations keep the memory bounded: when the current
// one is full it becomes the previous one, and the oldest is dropped.
type actors struct {
	mu        sync.Mutex
	cur, prev map[string]string
}

// Acted records that principal acted as client (server.Observer), for the
// audit lines of deadlock aborts.
func (t *Telemetry) Acted(principal, client string) {
	a := &t.actors
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur[client] == principal {
		return
	}
	if a.cur == nil || len(a.cur) >= actorsKept {
		a.prev, a.cur = a.cur, make(map[string]string)
	}
	a.cur[client] = principal
}

// principal returns the principal that last acted as client on this
// server, "" when none is remembered.
func (a *actors) principal(client string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.cur[client]; ok {
		return p
	}
	return a.prev[client]
}
