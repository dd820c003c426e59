package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// LockSpec is one lock of a set that AcquireAll takes, and its mode.
type LockSpec struct {
	Lock   string
	Shared bool // a shared lease instead of an exclusive one
}

// AcquireAll takes every lock of locks for opts.Client, in one canonical
// order, by name, byte-wise, whatever the order given; and returns them as
// a *LeaseSet once it holds them all. Clients that all take their sets
// this way never wait for each other in a cycle, so none of them is ever a
// deadlock victim (docs/contract.md section 4): a client waiting for lock
// L holds only locks before L, and waits only for L's holders, which wait
// (if at all) for locks after L, and for L's waiters ahead of it.
//
//	// Two jobs, one wanting orders then invoices, the other invoices then
//	// orders: taken one by one in those orders they can deadlock, and the
//	// service aborts one. With AcquireAll both take invoices first.
//	set, err := c.AcquireAll(ctx, []client.LockSpec{{Lock: "orders"}, {Lock: "invoices", Shared: true}},
//		client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, Wait: 10 * time.Minute})
//
// opts.Wait is one budget for the whole set: each acquire waits for what
// is left of it, to the nearest second (the server's unit). opts.TTL is every lease's; opts.Shared must be false (each
// LockSpec says its mode). opts.WithdrawFor is as for Acquire.
//
// Each lease renews itself while the later locks are awaited; once the set
// is complete, they are renewed together, at once and then every third of
// the ttl from that instant. The set's Lost is closed when any lease is
// lost; Release releases them all.
//
// A failure part-way releases the locks already taken and returns an
// *AcquireAllError naming the lock that failed, which wraps what Acquire
// returned (errors.Is(err, ErrQueued), ErrDeadlock: aborted as a deadlock
// victim by a client that does not take its locks in this order) or the
// lost lease's error when a lock already taken was lost during the wait.
// A set with an empty or repeated name is refused before anything is sent.
func (c *Client) AcquireAll(ctx context.Context, locks []LockSpec, opts AcquireOptions) (*LeaseSet, error) {
	if opts.Shared {
		return nil, errors.New("AcquireAll: give each LockSpec its mode; AcquireOptions.Shared must be false")
	}
	if len(locks) == 0 {
		return nil, errors.New("AcquireAll: no lock to take")
	}
	order := CanonicalOrder(locks)
	for i, l := range order {
		if l.Lock == "" {
			return nil, errors.New("AcquireAll: a lock with an empty name")
		}
		if i > 0 && order[i-1].Lock == l.Lock {
			return nil, fmt.Errorf("AcquireAll: %q is in the set twice", l.Lock)
		}
	}
	deadline := time.Now().Add(opts.Wait)
	set := &LeaseSet{lost: make(chan struct{})}
	for _, l := range order {
		o := opts
		o.Shared = l.Shared
		// The server counts whole seconds: what is left, to the nearest
		// second (rounded down, the first lock would leave the others a
		// second short each).
		o.Wait = max(time.Until(deadline), 0).Round(time.Second)
		if o.WithdrawFor <= 0 {
			o.WithdrawFor = o.Wait + o.TTL
		}
		lease, failed, err := set.acquireWatching(ctx, c, l.Lock, o)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			set.Release(rctx)
			cancel()
			return nil, &AcquireAllError{Lock: failed, Lost: failed != l.Lock, Err: err}
		}
		set.leases = append(set.leases, lease)
	}
	for _, l := range set.leases {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	go set.watch()
	return set, nil
}

// acquireWatching acquires lock while watching the leases already in the
// set: when one of them is lost during the wait, the acquire is abandoned
// (and withdrawn) and that lease's lock and error returned. An abort as a
// deadlock victim ends every lease of the client too: it is returned as
// the acquire's, whichever was noticed first.
func (s *LeaseSet) acquireWatching(ctx context.Context, c *Client, lock string, o AcquireOptions) (*Lease, string, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lostLock string
	var lostErr error
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		cases := make([]<-chan struct{}, len(s.leases))
		for i, l := range s.leases {
			cases[i] = l.Lost()
		}
		if i, ok := firstClosed(cases, stop); ok {
			lostLock, lostErr = s.leases[i].Lock(), s.leases[i].Err()
			cancel()
		}
	}()
	lease, err := c.Acquire(actx, lock, o)
	close(stop)
	<-watched
	if lostErr != nil && !errors.Is(err, ErrDeadlock) {
		if lease != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			lease.Release(rctx)
			rcancel()
		}
		return nil, lostLock, lostErr
	}
	return lease, lock, err
}

// firstClosed waits until one of chans is closed, and returns its index;
// false when stop is closed first.
func firstClosed(chans []<-chan struct{}, stop <-chan struct{}) (int, bool) {
	if len(chans) == 0 {
		<-stop
		return 0, false
	}
	merged := make(chan int, len(chans))
	done := make(chan struct{})
	defer close(done)
	for i, ch := range chans {
		go func() {
			select {
			case <-ch:
				merged <- i
			case <-done:
			}
		}()
	}
	select {
	case i := <-merged:
		return i, true
	case <-stop:
		// A lease lost as the acquire returned still counts.
		select {
		case i := <-merged:
			return i, true
		default:
		}
		for i, ch := range chans {
			select {
			case <-ch:
				return i, true
			default:
			}
		}
		return 0, false
	}
}

// CanonicalOrder returns locks sorted by name, byte-wise: the order in
// which AcquireAll takes them.
func CanonicalOrder(locks []LockSpec) []LockSpec {
	out := slices.Clone(locks)
	slices.SortStableFunc(out, func(a, b LockSpec) int { return strings.Compare(a.Lock, b.Lock) })
	return out
}

// AcquireAllError says which lock of a set was not obtained, or (Lost)
// was lost while a later one was awaited; Err says why. From
// LeaseSet.Err, Lost is true and Err is the lost lease's error.
type AcquireAllError struct {
	Lock string
	Lost bool
	Err  error
}

func (e *AcquireAllError) Error() string {
	if e.Lost {
		return fmt.Sprintf("the lease on %q was lost: %v", e.Lock, e.Err)
	}
	return fmt.Sprintf("%q: %v", e.Lock, e.Err)
}

func (e *AcquireAllError) Unwrap() error { return e.Err }

// LeaseSet is the set of leases AcquireAll took, in canonical order. Its
// methods are safe for concurrent use.
type LeaseSet struct {
	leases []*Lease
	lost   chan struct{}

	mu  sync.Mutex
	err error
}

// Leases are the set's leases, in canonical order.
func (s *LeaseSet) Leases() []*Lease { return slices.Clone(s.leases) }

// Lease is the lease on lock, nil if lock is not in the set.
func (s *LeaseSet) Lease(lock string) *Lease {
	for _, l := range s.leases {
		if l.Lock() == lock {
			return l
		}
	}
	return nil
}

// Lost is closed once any lease of the set is lost (Lease.Lost), or the
// set released. Work under the set must stop then.
func (s *LeaseSet) Lost() <-chan struct{} { return s.lost }

// Err is nil while every lease is kept; then the first lost lease's
// error, as an *AcquireAllError naming its lock.
func (s *LeaseSet) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *LeaseSet) watch() {
	chans := make([]<-chan struct{}, len(s.leases))
	for i, l := range s.leases {
		chans[i] = l.Lost()
	}
	i, _ := firstClosed(chans, nil)
	s.mu.Lock()
	s.err = &AcquireAllError{Lock: s.leases[i].Lock(), Lost: true, Err: s.leases[i].Err()}
	s.mu.Unlock()
	close(s.lost)
}

// Release releases every lease of the set, the last taken first, and
// returns their errors joined (nil when all were confirmed); see
// Lease.Release. Later calls return the same.
func (s *LeaseSet) Release(ctx context.Context) error {
	var errs []error
	for i := len(s.leases) - 1; i >= 0; i-- {
		if err := s.leases[i].Release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", s.leases[i].Lock(), err))
		}
	}
	return errors.Join(errs...)
}
