package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// AcquireOptions are an acquire's arguments besides the lock.
type AcquireOptions struct {
	Client string        // who acquires: the name the lease is held under
	TTL    time.Duration // the lease's length, whole seconds from 1s to 24h (the server judges)
	Shared bool          // a shared lease instead of an exclusive one (SPEC.md section 3)
	// Wait is how long the server may hold the request while the client is
	// queued, in whole seconds up to an hour; 0 answers at once.
	Wait time.Duration
}

// Acquire asks for lock and, when it is granted, returns a *Lease that renews
// itself until Release is called or it is lost. The caller must call Release.
// ctx bounds the request (the wait included), not the lease.
//
// When the lock is not granted, Acquire returns:
//   - a *QueuedError (ErrQueued) when the client was still queued as the
//     wait ran out (at once when Wait is 0). Acquire has then withdrawn the
//     request, so the client is not left queued for a lease nobody would
//     renew;
//   - a *DeadlockError (ErrDeadlock) when the client was aborted as a
//     deadlock victim, by this request or, during the wait, by another
//     client's; every lease the client held is gone;
//   - ErrWithdrawn when a release from elsewhere withdrew the request during
//     the wait;
//   - an *Error for an error result: ErrClientBusy (the client already waits
//     for a lock or holds this one), ErrInvalidTTL, ErrInvalidArguments, ...
//   - any other error when no answer was obtained, or a 5xx answer (such as
//     ErrUnavailable). Acquire then sends a release for the client on lock,
//     as the request may have left it queued or granted; that release would also end a lease the client already held
//     on lock under another Lease, which the server would have refused as
//     client busy anyway.
func (c *Client) Acquire(ctx context.Context, lock string, opts AcquireOptions) (*Lease, error) {
	send := time.Now()
	res, err := c.Do(ctx, AcquireCall(lock, opts))
	if err != nil {
		c.withdraw(ctx, opts.Client, lock)
		return nil, err
	}
	recv := time.Now()
	if res.Status >= 500 {
		// The server or its database failed (503 unavailable): the
		// request may have been queued or granted all the same.
		c.withdraw(ctx, opts.Client, lock)
		return nil, resultError(res)
	}
	if res.Status != http.StatusOK {
		return nil, resultError(res)
	}
	g, err := decodeAcquire(res)
	if err != nil {
		if _, ok := err.(*QueuedError); ok {
			c.withdraw(ctx, opts.Client, lock)
		}
		return nil, err
	}
	// A grant that took a while came from the queue: the lease started when
	// the previous one ended, which the answer does not date, so the first
	// renew goes out at once to learn how long the lease really has.
	waited := recv.Sub(send) > time.Second
	base := send
	if waited {
		base = recv
	}
	return startLease(c, opts.Client, lock, opts.TTL, g, base, waited), nil
}

// withdraw releases client's request on lock after an acquire whose outcome
// is unknown or unwanted; it is best effort, whatever ctx's state.
func (c *Client) withdraw(ctx context.Context, client, lock string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.Do(ctx, ReleaseCall(client, lock))
}

// grant is a granted acquire's answer.
type grant struct {
	token     int64
	expiresAt time.Time
	victims   []string
}

// decodeAcquire reads a 200 answer of acquire (SPEC.md D5, docs/api.md).
func decodeAcquire(r *Result) (grant, error) {
	bad := fmt.Errorf("%s: unexpected answer %.200s", r.path, r.JSON)
	var s string
	if json.Unmarshal(r.JSON, &s) == nil {
		if s == "withdrawn" {
			return grant{}, ErrWithdrawn
		}
		return grant{}, bad
	}
	var elems []json.RawMessage
	if json.Unmarshal(r.JSON, &elems) != nil || len(elems) == 0 {
		return grant{}, bad
	}
	var tag string
	json.Unmarshal(elems[0], &tag)
	var victims []string
	switch tag {
	case "granted":
		var g grant
		dst := []any{&tag, &g.token, (*unixTime)(&g.expiresAt)}
		if len(elems) == 4 {
			dst = append(dst, &g.victims)
		}
		if decodeTuple(r.JSON, dst...) != nil {
			return grant{}, bad
		}
		return g, nil
	case "queued":
		var q QueuedError
		dst := []any{&tag, &q.Position}
		if len(elems) == 3 {
			dst = append(dst, &q.Victims)
		}
		if decodeTuple(r.JSON, dst...) != nil {
			return grant{}, bad
		}
		return grant{}, &q
	case "deadlock":
		if decodeTuple(r.JSON, &tag, &victims) != nil {
			return grant{}, bad
		}
		return grant{}, &DeadlockError{Victims: victims}
	}
	return grant{}, bad
}
