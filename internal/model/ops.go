package model

import "sort"

// acquire is ["acquire", ts, client, lock, ttl] or [..., ttl, mode]: L4, L5,
// L8, S1, S2, D1 and, when the request is queued, D3-D5.
func (m *Model) acquire(ts int64, args []any) any {
	if len(args) != 3 && len(args) != 4 {
		return errInvalidArguments // step 6
	}
	clientName, okClient := asName(args[0])
	lockName, okLock := asName(args[1])
	ttl, okTTL := asInteger(args[2])
	mode, okMode := modeExclusive, true
	if len(args) == 4 {
		mode, okMode = asMode(args[3])
	}
	if !okClient || !okLock || !okTTL || !okMode {
		return errInvalidArguments // step 7
	}
	if !ttlInRange(ttl) {
		return errInvalidTTL // step 8
	}

	// L8: busy if waiting for any lock, or already holding this one.
	c := m.clients[clientName]
	if c != nil && (c.waiting != nil || c.holds[lockName] != nil) {
		return errClientBusy
	}
	if c == nil {
		c = m.register(clientName) // D1: passed validation and the busy check
	}

	l := m.lockFor(lockName)
	if len(l.queue) == 0 && compatible(l, mode) { // S2
		le := m.grant(l, clientName, mode, ttl, ts)
		return []any{"granted", le.token, le.expiresAt}
	}
	m.enqueue(l, clientName, mode, ttl)

	victims := m.resolveDeadlocks(clientName, ts)

	// D5
	if n := len(victims); n > 0 && victims[n-1] == clientName {
		return []any{"deadlock", victims}
	}
	var result []any
	if le := c.holds[lockName]; le != nil {
		result = []any{"granted", le.token, le.expiresAt}
	} else {
		result = []any{"queued", int64(queueIndex(c.waiting) + 1)}
	}
	if len(victims) > 0 {
		result = append(result, victims)
	}
	return result
}

// renew is ["renew", ts, client, lock, ttl] (L2): only a live holder may renew;
// expires_at becomes ts + ttl (possibly shorter), the token stays.
func (m *Model) renew(ts int64, args []any) any {
	if len(args) != 3 {
		return errInvalidArguments
	}
	clientName, okClient := asName(args[0])
	lockName, okLock := asName(args[1])
	ttl, okTTL := asInteger(args[2])
	if !okClient || !okLock || !okTTL {
		return errInvalidArguments
	}
	if !ttlInRange(ttl) {
		return errInvalidTTL
	}
	le := m.leaseOf(clientName, lockName)
	if le == nil {
		return errNotHolder
	}
	le.expiresAt = expiry(ts, ttl)
	m.nextExpiry = min(m.nextExpiry, le.expiresAt)
	return []any{"renewed", le.token, le.expiresAt}
}

// release is ["release", ts, client, lock] (L7): a holder's lease ends now, a
// waiter's request is withdrawn; either way S3 runs with grants starting at
// the release's ts. Anyone else is not a holder.
func (m *Model) release(ts int64, args []any) any {
	if len(args) != 2 {
		return errInvalidArguments
	}
	clientName, okClient := asName(args[0])
	lockName, okLock := asName(args[1])
	if !okClient || !okLock {
		return errInvalidArguments
	}
	if le := m.leaseOf(clientName, lockName); le != nil {
		m.removeLease(le, endReleased, ts)
		m.grantQueue(le.lock, ts)
		return "released"
	}
	if c := m.clients[clientName]; c != nil && c.waiting != nil && c.waiting.lock.name == lockName {
		l := c.waiting.lock
		m.removeWaiter(c)
		m.grantQueue(l, ts)
		return "withdrawn"
	}
	return errNotHolder
}

// leaseOf returns clientName's live lease on lockName, or nil. Lapsed leases
// were retired by advance (L1), so every lease still recorded is live.
func (m *Model) leaseOf(clientName, lockName string) *lease {
	if c := m.clients[clientName]; c != nil {
		return c.holds[lockName]
	}
	return nil
}

// inspect is ["inspect", ts, lock] (S4): holders by token, lowest first, and the
// queue oldest first; a lock nobody has used has both empty.
func (m *Model) inspect(args []any) any {
	if len(args) != 1 {
		return errInvalidArguments
	}
	lockName, ok := asName(args[0])
	if !ok {
		return errInvalidArguments
	}
	holders := []any{}
	queue := []any{}
	if l := m.locks[lockName]; l != nil {
		for _, h := range l.holders {
			holders = append(holders, []any{h.client, h.mode, h.token, h.expiresAt})
		}
		for _, w := range l.queue {
			queue = append(queue, []any{w.client, w.mode})
		}
	}
	return map[string]any{"holders": holders, "queue": queue}
}

// write is ["write", ts, lock, key, value, token] (L6): accepted when token is
// at least the highest accepted for the lock so far (0 if none); the store
// never looks at leases.
func (m *Model) write(args []any) any {
	if len(args) != 4 {
		return errInvalidArguments
	}
	lockName, okLock := asName(args[0])
	key, okKey := asName(args[1])
	value, okValue := asName(args[2])
	token, okToken := asToken(args[3])
	if !okLock || !okKey || !okValue || !okToken {
		return errInvalidArguments
	}
	if token < m.highest[lockName] {
		return errStaleToken
	}
	m.highest[lockName] = token
	m.values[storeKey{lockName, key}] = value
	return "ok"
}

// read is ["read", ts, lock, key] (L6): the last accepted value, or null.
func (m *Model) read(args []any) any {
	if len(args) != 2 {
		return errInvalidArguments
	}
	lockName, okLock := asName(args[0])
	key, okKey := asName(args[1])
	if !okLock || !okKey {
		return errInvalidArguments
	}
	if v, ok := m.values[storeKey{lockName, key}]; ok {
		return v
	}
	return nil
}

// status is ["status", ts, client] (D6): age, holds sorted by lock name
// (byte-wise) and the lock waited for; an unregistered client has a null age,
// no holds and waits for nothing.
func (m *Model) status(args []any) any {
	if len(args) != 1 {
		return errInvalidArguments
	}
	clientName, ok := asName(args[0])
	if !ok {
		return errInvalidArguments
	}
	c := m.clients[clientName]
	if c == nil {
		return map[string]any{"age": nil, "holds": []any{}, "waiting": nil}
	}
	names := make([]string, 0, len(c.holds))
	for name := range c.holds {
		names = append(names, name)
	}
	sort.Strings(names)
	holds := []any{}
	for _, name := range names {
		h := c.holds[name]
		holds = append(holds, []any{name, h.mode, h.token, h.expiresAt})
	}
	var waiting any
	if c.waiting != nil {
		waiting = c.waiting.lock.name
	}
	return map[string]any{"age": c.age, "holds": holds, "waiting": waiting}
}
