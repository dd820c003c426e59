package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// AcquireOptions are an acquire's arguments besides the lock.
type AcquireOptions struct {
	Client string        // who acquires: the name the lease is held under
	TTL    time.Duration // the lease's length, whole seconds from 1s to 24h (the server judges)
	Shared bool          // a shared lease instead of an exclusive one (docs/contract.md section 3)
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
	res, err := c.AcquireOnce(ctx, lock, opts)
	recv := time.Now()
	var e *Error
	switch {
	case errors.As(err, &e) && e.Status == 0:
		return nil, err // refused before it was sent
	case errors.As(err, &e) && e.Status < 500:
		return nil, err
	case err != nil:
		// No answer, or the server or its database failed (503
		// unavailable): the request may have been queued or granted all
		// the same.
		c.withdraw(ctx, opts.Client, lock)
		return nil, err
	}
	switch res.Outcome {
	case lk.Granted:
	case lk.Queued:
		c.withdraw(ctx, opts.Client, lock)
		return nil, &QueuedError{Position: res.Position, Victims: res.Victims}
	case lk.Deadlock:
		return nil, &DeadlockError{Victims: res.Victims}
	case lk.Withdrawn:
		return nil, ErrWithdrawn
	default:
		return nil, fmt.Errorf("%s: unexpected outcome %q", pathAcquire, res.Outcome)
	}
	// A grant that took a while came from the queue: the lease started when
	// the previous one ended, in the server's time, which this machine's
	// clock may not match, so the first renew goes out at once to learn how
	// long the lease really has.
	waited := recv.Sub(send) > time.Second
	base := send
	if waited {
		base = recv
	}
	return startLease(c, opts.Client, lock, opts.TTL, res, base, waited), nil
}

// withdraw releases client's request on lock after an acquire whose outcome
// is unknown or unwanted; it is best effort, whatever ctx's state.
func (c *Client) withdraw(ctx context.Context, client, lock string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	c.Release(ctx, client, lock)
}
