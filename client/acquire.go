package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
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
	// WithdrawFor bounds how long Acquire keeps sending the release that
	// withdraws its request when the acquire's outcome is unknown, or when
	// the client was still queued as the wait ran out, while no answer
	// comes back (the server down or restarting). 0 (or less) means Wait
	// plus TTL: the time the caller was prepared to give the lock, its wait
	// and then its lease. One release is always sent.
	WithdrawFor time.Duration
}

// withdrawAttempt bounds each release that withdraws a request, so that a
// server that took the connection and then hung does not use up the time
// left for retries.
const withdrawAttempt = 5 * time.Second

// Acquire asks for lock and, when it is granted, returns a *Lease that renews
// itself until Release is called or it is lost. The caller must call Release.
// ctx bounds the request (the wait included), not the lease.
//
// When the lock is not granted, Acquire returns:
//   - a *QueuedError (ErrQueued) when the client was still queued as the
//     wait ran out (at once when Wait is 0). Acquire has then withdrawn the
//     request, so the client is not left queued for a lease nobody would
//     renew (QueuedError.WithdrawErr says if that failed);
//   - a *DeadlockError (ErrDeadlock) when the client was aborted as a
//     deadlock victim, by this request or, during the wait, by another
//     client's; every lease the client held is gone;
//   - ErrWithdrawn when a release from elsewhere withdrew the request during
//     the wait;
//   - a *GrantLostError (matching ErrNotHolder) when a grant that took over
//     a second to answer came from the queue and the renew sent to confirm
//     it was refused: the lease lapsed before the answer arrived (a pause
//     of the server or of this process), so it was never safe to use;
//   - an *Error for an error result: ErrClientBusy (the client already waits
//     for a lock or holds this one), ErrInvalidTTL, ErrInvalidArguments,
//     lk.ErrRateLimited once the retries after Retry-After have run out
//     (WithRateLimitWait; Acquire retries for up to Wait if that is longer,
//     and asks for what is left of the wait), ...;
//   - an error that never left this machine (the server refused the
//     connection, its certificate was not trusted): nothing was queued;
//   - the *Error of a 5xx answer that said "applied": false
//     (Error.NotApplied: the server is stopping, or lost its database, and
//     did nothing) once no wait is left: within the wait, Acquire asks
//     again, every half a second, of whichever server answers at the URL;
//   - a *QueuedError too when a server stopped during the wait (queued,
//     reason server_stopping) and the wait then ran out. Until then the
//     client is still queued: Acquire follows the wait through the
//     client's status, read every half a second from whichever server
//     answers at the URL (another one, or this one restarted), and takes
//     the lease once the status shows it, confirmed by a renew (its
//     Predecessors are then unknown); ErrWithdrawn when the status shows
//     the client neither holding nor awaiting lock any more;
//   - an *UnknownOutcomeError when the request may have reached the server
//     but no answer told what became of it: the connection broke (the
//     server died during the wait, say), ctx ended, or a 5xx answer that
//     did not say "applied": false (Error.OutcomeUnknown). The request may have left the client queued, or
//     granted a lease nobody renews, so Acquire withdraws it: it sends a
//     release for the client on lock, again while no answer comes, for up
//     to WithdrawFor, whatever ctx's state. That release would also end a
//     lease the client already held on lock under another Lease, which the
//     server would have refused as client busy anyway. The error wraps the
//     acquire's own (errors.Is(err, ErrUnavailable) and
//     errors.Is(err, context.Canceled) work), and its WithdrawErr is nil
//     when the server confirmed the client neither holds nor waits for lock.
func (c *Client) Acquire(ctx context.Context, lock string, opts AcquireOptions) (*Lease, error) {
	withdrawFor := opts.WithdrawFor
	if withdrawFor <= 0 {
		withdrawFor = opts.Wait + opts.TTL
	}
	start := time.Now()
	retryUntil := start.Add(max(opts.Wait, c.rateLimitWait))
	waitEnds := start.Add(opts.Wait)
	once := opts
	stopped := false // a server stopped during this acquire: connections refused are its restart
	for {
		send := time.Now()
		res, err := c.AcquireOnce(context.WithValue(ctx, noRateLimitRetry{}, true), lock, once)
		recv := time.Now()
		var e *Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusTooManyRequests:
			// Refused before anything happened: try again after the
			// server's delay, asking for what is left of the wait.
			if !waitRetry(ctx, e, retryUntil) {
				return nil, err
			}
			once.Wait = max(opts.Wait-time.Since(start), 0).Truncate(time.Second)
			continue
		case errors.As(err, &e) && e.Status >= 500 && e.NotApplied && pauseUntil(ctx, waitEnds):
			// The server said nothing happened (it is stopping, or its
			// database is away): ask again, for what is left of the wait,
			// of whichever server answers at the URL.
			stopped = stopped || errors.Is(err, ErrShuttingDown)
			once.Wait = max(time.Until(waitEnds), 0).Truncate(time.Second)
			continue
		case errors.As(err, &e) && e.Status >= 500 && e.NotApplied:
			return nil, err // nothing happened, and no wait is left
		case errors.As(err, &e) && e.Status < 500:
			return nil, err // an answer, or refused before it was sent (Status 0)
		case err != nil && unsent(err) && stopped && pauseUntil(ctx, waitEnds):
			once.Wait = max(time.Until(waitEnds), 0).Truncate(time.Second)
			continue
		case err != nil && unsent(err):
			return nil, err
		case err != nil:
			werr := c.withdraw(ctx, opts.Client, lock, withdrawFor)
			return nil, &UnknownOutcomeError{Client: opts.Client, Lock: lock, Err: err, WithdrawErr: werr}
		}
		switch res.Outcome {
		case lk.Granted:
		case lk.Queued:
			if res.Reason == lk.ReasonServerStopping && time.Now().Before(waitEnds) {
				return c.rejoin(ctx, opts, lock, res, waitEnds, withdrawFor)
			}
			werr := c.withdraw(ctx, opts.Client, lock, withdrawFor)
			return nil, &QueuedError{Position: res.Position, Victims: res.Victims, WithdrawErr: werr}
		case lk.Deadlock:
			return nil, &DeadlockError{Victims: res.Victims, Aborts: res.Aborts}
		case lk.Withdrawn:
			return nil, ErrWithdrawn
		default:
			return nil, fmt.Errorf("%s: unexpected outcome %q", pathAcquire, res.Outcome)
		}
		if recv.Sub(send) <= time.Second {
			return startLease(c, opts.Client, lock, opts.TTL, res, send, false), nil
		}
		return c.confirmGrant(ctx, opts, lock, res, send)
	}
}

// rejoinPoll is how often rejoin reads the client's status: the delay,
// at most, between a grant and the lease's start.
const rejoinPoll = 500 * time.Millisecond

// rejoin waits on after a server stopped during the wait (queued, with
// reason server_stopping): the client is still queued in the database,
// and an acquire sent again would be refused as client busy, so it reads
// the client's status, from whichever server answers at the URL (another
// one, or this one restarted), until the client holds lock, or no longer
// waits for it, or the wait runs out (then it withdraws, as Acquire does).
// A grant found so is confirmed by a renew, as a late one is: when it was
// made is unknown.
func (c *Client) rejoin(ctx context.Context, opts AcquireOptions, lock string, res lk.AcquireResult, until time.Time, withdrawFor time.Duration) (*Lease, error) {
	position := res.Position
	for {
		qctx, cancel := context.WithTimeout(ctx, withdrawAttempt)
		st, err := c.Status(qctx, opts.Client)
		cancel()
		var e *Error
		switch {
		case ctx.Err() != nil:
			werr := c.withdraw(ctx, opts.Client, lock, withdrawFor)
			return nil, &UnknownOutcomeError{Client: opts.Client, Lock: lock, Err: ctx.Err(), WithdrawErr: werr}
		case errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests:
			// Refused (a principal without status): the wait cannot be
			// followed, so it ends as if it had run out.
			werr := c.withdraw(ctx, opts.Client, lock, withdrawFor)
			return nil, &QueuedError{Position: position, Victims: res.Victims, WithdrawErr: werr}
		case err != nil:
			// The server restarting, or none answering yet.
		default:
			for _, h := range st.Holds {
				if h.Lock == lock {
					g := lk.AcquireResult{Outcome: lk.Granted, Token: h.Token, ExpiresAt: h.ExpiresAt, Victims: res.Victims, Aborts: res.Aborts}
					// Counted from a ttl ago: without the renew's
					// answer the lease is taken as lost at once.
					return c.confirmGrant(ctx, opts, lock, g, time.Now().Add(-opts.TTL))
				}
			}
			if st.Waiting == nil || st.Waiting.Lock != lock {
				// The request ended while the server was away from
				// this client: withdrawn from elsewhere, or aborted.
				return nil, ErrWithdrawn
			}
			position = st.Waiting.Position
		}
		if !pauseUntil(ctx, until) {
			werr := c.withdraw(ctx, opts.Client, lock, withdrawFor)
			return nil, &QueuedError{Position: position, Victims: res.Victims, WithdrawErr: werr}
		}
	}
}

// pauseUntil sleeps before a retry, rejoinPoll or less, and reports
// whether there is time left before until, and ctx still lives.
func pauseUntil(ctx context.Context, until time.Time) bool {
	d := min(rejoinPoll, time.Until(until))
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return time.Now().Before(until)
	case <-ctx.Done():
		return false
	}
}

// confirmGrant renews a grant that took a while to answer before handing it
// to the caller. Such a grant came from the queue at an instant between the
// acquire's send and its answer, in the server's time: all this machine
// knows is that the lease ends no earlier than send+ttl (less the second
// the server's clock rounds away). After a long wait, or a server or
// process paused between the grant and its answer, that may already be
// past, and the lease may have lapsed and gone to a successor: counting it
// from the answer would leave Lost open while a successor holds the lock.
// A renew answered says how long the lease really has, counted from the
// renew's own send; a renew refused means the lease is already gone.
func (c *Client) confirmGrant(ctx context.Context, opts AcquireOptions, lock string, res lk.AcquireResult, send time.Time) (*Lease, error) {
	renewSend := time.Now()
	r, err := c.Renew(ctx, opts.Client, lock, opts.TTL)
	var e *Error
	switch {
	case err == nil:
		res.ExpiresAt = r.ExpiresAt
		return startLease(c, opts.Client, lock, opts.TTL, res, renewSend, false), nil
	case errors.As(err, &e) && e.Status != 0 && !transient(e.Status):
		return nil, &GrantLostError{Token: res.Token, Err: err}
	}
	// No answer: the lease counts from the acquire's send, and the
	// keep-alive goes on trying at once; if that moment has passed, Lost
	// closes at once.
	return startLease(c, opts.Client, lock, opts.TTL, res, send, true), nil
}

// withdraw releases client's request on lock after an acquire whose outcome
// is unknown or unwanted, whatever ctx's state: a request left queued would
// be granted a lease that nobody renews, and would make the client busy
// until it lapsed. While no answer comes (the server down, restarting, or
// answering 5xx), it sends the release again, backing off from 0.1 s to 1 s,
// for up to within (a release under way then is given a second at least). It returns nil once the server said that client neither
// holds nor waits for lock (withdrawn, released, or not holder), else the
// last error.
func (c *Client) withdraw(ctx context.Context, client, lock string, within time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	deadline := time.Now().Add(within)
	backoff := 100 * time.Millisecond
	for {
		// Each release gets a second at least, however little is left.
		actx, cancel := context.WithTimeout(ctx, min(max(time.Until(deadline), time.Second), withdrawAttempt))
		_, err := c.Release(actx, client, lock)
		cancel()
		var e *Error
		switch {
		case err == nil, errors.Is(err, ErrNotHolder):
			return nil
		case errors.As(err, &e) && !transient(e.Status):
			return err // a refusal that a retry would meet again
		}
		pause := min(backoff, time.Until(deadline))
		if pause <= 0 {
			return err
		}
		time.Sleep(pause)
		backoff = min(2*backoff, time.Second)
	}
}

// unsent reports whether err says that a request never left this machine: no
// connection was made (refused, unreachable, a name that does not resolve),
// the server's certificate was not trusted, or an https:// URL named a
// server that speaks plain HTTP. net/http sends a POST again
// only when nothing of it was written, so a final dial error means no
// attempt reached the server.
func unsent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.Is(err, http.ErrSchemeMismatch)
}
