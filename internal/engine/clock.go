package engine

import (
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// Clock is where the engine reads time; tests drive a ManualClock.
type Clock interface {
	Now() time.Time
	// After delivers once the clock has moved d past the time of the call.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

// Now is the machine's clock, stepped by the failpoint clock-step-back in
// a build with failpoints (ClockOffset is a constant 0 without the tag).
// Timers (After) run on the monotonic clock, which a step of the
// machine's clock does not move either.
func (realClock) Now() time.Time                         { return time.Now().Add(failpoint.ClockOffset()) }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// ManualClock is a Clock that moves only when told to.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []manualWaiter
}

type manualWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewManualClock returns a clock standing at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After delivers when Set or Advance moves the clock to now+d or later.
func (c *ManualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := c.now.Add(d)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, manualWaiter{at: at, ch: ch})
	return ch
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (backwards too: the server never lets its own
// time run backwards).
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !t.Before(w.at) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}
