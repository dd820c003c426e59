package engine

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// lapseTimer retires leases at their expiry: a timer for the next expiry,
// not a polling loop. Hand-overs still start at the instant each lease ended
// (the rules see to that, L3); the timer only makes them happen on time, so
// that blocked acquires are answered and listings are current.
type lapseTimer struct {
	r    *runner
	com  *committer
	log  *slog.Logger
	kick chan struct{} // the next expiry may have moved
}

// poke tells the timer that the next expiry may have changed.
func (l *lapseTimer) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *lapseTimer) loop(ctx context.Context) {
	var fire <-chan time.Time
	armed, armedFor := false, int64(0) // fire is set for expiry armedFor
	firedFor := int64(math.MinInt64)   // the expiry the last sweep was for
	var failing time.Duration          // while sweeps fail: the wait before the next
	for {
		// Every operation pokes the timer; it is set again only when the
		// next expiry moved.
		if next := l.r.nextExpiry(); !armed || next != armedFor {
			fire, armed, armedFor = nil, true, next
			if next != math.MaxInt64 {
				// A lease ending at E is usable while ts < E: it lapses
				// when the clock reaches E.000. Go timers never fire early,
				// and an early bound (nextExpiry may be one) only costs a
				// sweep that finds nothing and leaves the exact next
				// expiry.
				d := max(time.Unix(next, 0).Sub(l.com.now()), 0)
				if next == firedFor {
					// The sweep found the clock short of next: this
					// machine's reading of the database's clock is a little
					// ahead. Try again soon, not at once.
					d = max(d, 10*time.Millisecond)
				}
				d = max(d, failing)
				fire = l.com.clock.After(d)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-fire:
			armed, firedFor = false, armedFor
			err := l.com.submit(ctx, "lapse", func(ctx context.Context, ts int64) error {
				return l.r.do(ctx, ts, func(*service.Op) error { return nil })
			})
			if err != nil && ctx.Err() == nil {
				level := slog.LevelError
				if errors.Is(err, lk.ErrUnavailable) {
					level = slog.LevelWarn // the database is away: not a fault of ours
				}
				l.log.Log(ctx, level, "retiring lapsed leases", "err", err)
				// The database is away: do not hammer it while it recovers.
				failing = min(max(2*failing, 100*time.Millisecond), 2*time.Second)
			} else {
				failing = 0
			}
		}
	}
}
