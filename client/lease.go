package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// Lease is a granted lock that renews itself, with the same ttl, about every
// third of its ttl until Release is called or it is lost. Its methods are
// safe for concurrent use.
type Lease struct {
	c         *Client
	client    string
	lock      string
	ttl       time.Duration
	token     int64
	victims   []string
	grantedAt time.Time
	// predecessors and aborts explain the grant (docs/api.md, "Answers
	// that say why").
	predecessors []lk.Predecessor
	aborts       []lk.Abort

	stop context.CancelFunc
	done chan struct{} // closed when the keep-alive has stopped
	kick chan struct{} // a value: renew now (a LeaseSet aligning its leases)

	mu        sync.Mutex
	expiresAt time.Time
	err       error         // why the lease ended; nil while it is kept
	lost      chan struct{} // closed when err is set

	releaseOnce sync.Once
	releaseErr  error
}

func startLease(c *Client, client, lock string, ttl time.Duration, g lk.AcquireResult, base time.Time, renewNow bool) *Lease {
	ctx, stop := context.WithCancel(context.Background())
	l := &Lease{
		c: c, client: client, lock: lock, ttl: ttl, token: g.Token, victims: g.Victims, grantedAt: time.Unix(g.GrantedAt, 0),
		predecessors: g.Predecessors, aborts: g.Aborts,
		stop: stop, done: make(chan struct{}), kick: make(chan struct{}, 1), expiresAt: time.Unix(g.ExpiresAt, 0), lost: make(chan struct{}),
	}
	go l.keepAlive(ctx, base, renewNow)
	return l
}

// Token is the lease's fencing token (L5); renewing keeps it.
func (l *Lease) Token() int64 { return l.token }

// ExpiresAt is when the lease ends unless renewed, as of its grant or latest
// renew: whole seconds of the server's clock.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// GrantedAt is when the lease started, in whole seconds of the server's
// clock: for a grant from the queue, the instant the previous lease ended.
func (l *Lease) GrantedAt() time.Time { return l.grantedAt }

// Lock is the lock the lease is on.
func (l *Lease) Lock() string { return l.lock }

// Client is the client that holds the lease.
func (l *Lease) Client() string { return l.client }

// Victims are the clients the acquire aborted as deadlock victims (D5), in
// abort order; usually none.
func (l *Lease) Victims() []string { return l.victims }

// Aborts explains each of Victims, in the same order: its age and the
// cycle it was chosen from.
func (l *Lease) Aborts() []lk.Abort { return l.aborts }

// Predecessors are the leases whose end made this grant possible, oldest
// end first (docs/api.md): none on a lock's first grant, for a reader that
// joined live readers, or from a server that does not explain. A
// predecessor that lapsed or was revoked may have left work half-done;
// lk.WorstEnding(l.Predecessors()) says whether one did.
func (l *Lease) Predecessors() []lk.Predecessor { return l.predecessors }

// Lost is closed when the lease is no longer kept: the server refused a
// renew (the lease was released from elsewhere, or it lapsed, or the client
// was aborted as a deadlock victim), or no renew succeeded before the
// earliest moment the lease may have ended (the send time of the last
// successful renew or of the acquire, plus the ttl, less the second the
// server's clock may round away), or Release was called. Err says which. Work
// under the lock must stop when Lost is closed.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is nil while the lease is kept. Once Lost is closed it is an *Error
// with ErrNotHolder when the server refused a renew, an error matching
// ErrExpired when renewing failed until the expiry, or ErrReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Write writes value under (lock, key) in the fenced store with the lease's
// token (Client.Write). The store does not look at leases: a lost lease's
// write still succeeds until a successor has written with a higher token.
func (l *Lease) Write(ctx context.Context, key, value string) error {
	_, err := l.c.Write(ctx, l.lock, key, value, l.token)
	return err
}

// Release stops the keep-alive and releases the lease. It returns nil when
// the server confirmed the release. If the lease was lost before, it returns
// Err's reason (and releases anyway after an ErrExpired loss, as the server
// may not have retired the lease yet). Otherwise it returns the release's
// error; if that request failed, the lease lapses at its expiry. Later calls
// return the first call's result.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.stop()
		<-l.done
		lostErr := l.Err()
		if lostErr == nil || errors.Is(lostErr, ErrExpired) {
			out, err := l.c.Release(ctx, l.client, l.lock)
			switch {
			case err != nil:
				l.releaseErr = err
			case out.Outcome != lk.Released:
				l.releaseErr = fmt.Errorf("%s: release answered %q, not \"released\"", pathRelease, out.Outcome)
			}
		}
		if lostErr != nil {
			l.releaseErr = lostErr
		}
		l.end(ErrReleased)
	})
	return l.releaseErr
}

// end records why the lease ended, the first time, and closes Lost.
func (l *Lease) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		close(l.lost)
	}
}

// keepAlive renews the lease every ttl/3 from the send time of the last
// successful renew (base). The server's clock counts whole seconds, so the
// lease may end up to a second before base+ttl: ttl/3 leaves room for
// retries before then from a ttl of 2s up. After a failure that may pass
// (the server unreachable, a 5xx), it retries every ttl/10 (0.1s to 1s)
// until base+ttl-1s, the earliest the lease may have ended, and gives up
// then. A refusal (not holder) ends the lease at once.
func (l *Lease) keepAlive(ctx context.Context, base time.Time, renewNow bool) {
	defer close(l.done)
	expiry := earliestEnd(base, l.ttl)
	next := base.Add(l.ttl / 3)
	if renewNow {
		next = time.Now()
	}
	retry := min(max(l.ttl/10, 100*time.Millisecond), time.Second)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		send := time.Now()
		rctx, cancel := context.WithDeadline(ctx, expiry)
		r, err := l.renew(rctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		var e *Error
		switch {
		case err == nil:
			l.mu.Lock()
			l.expiresAt = time.Unix(r.ExpiresAt, 0)
			l.mu.Unlock()
			expiry = earliestEnd(send, l.ttl)
			timer.Reset(time.Until(send.Add(l.ttl / 3)))
			continue
		case errors.As(err, &e) && e.Status != 0 && !transient(e.Status):
			l.end(err)
			return
		}
		now := time.Now()
		if !now.Before(expiry) {
			l.end(fmt.Errorf("%w: %w", ErrExpired, err))
			return
		}
		timer.Reset(min(retry, expiry.Sub(now)))
	}
}

// earliestEnd is the earliest a lease granted or renewed by a request sent at
// send may end on the server: its ts is the server's clock rounded down to
// the second, so the lease can end up to a second before send+ttl. When
// renewals fail, the lease counts as lost from then on: a job must stop
// before anyone else can have been given the lock, not after.
func earliestEnd(send time.Time, ttl time.Duration) time.Time {
	return send.Add(max(ttl-time.Second, 0))
}

func (l *Lease) renew(ctx context.Context) (lk.RenewResult, error) {
	return l.c.Renew(ctx, l.client, l.lock, l.ttl)
}

// transient reports whether an error status may pass on a retry: the
// server's own failures and shutdown, a proxy's timeouts.
func transient(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}
