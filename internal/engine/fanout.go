package engine

import (
	"context"
	"math"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// fanout is where committed events go: this server's, from the runner
// after each commit, and with peers every server's, from the listener. It
// is apart from Engine so that what an event wakes is in one place.
type fanout struct {
	r     *runner
	obs   Observer
	waits *waits
	bus   *Bus
	lapse *lapseTimer
}

// committed hands a committed transaction's events on: to the observer, to
// the blocked acquires, and on a database without peers to the bus (with
// peers, the listener hears them all, this server's included). It runs with
// the runner locked, so it only hands the events over.
func (f *fanout) committed(events []service.Event) {
	if f.obs != nil {
		f.obs.Committed(events)
	}
	f.waits.wake(events)
	if f.r.peers == nil {
		f.bus.add(events)
	}
}

// listen hears what every server on the database did (peers.go): the
// other servers' grants, aborts and withdrawals wake this server's blocked
// acquires, their grants and renewals move its lapse timer, and every
// server's numbered events go to the bus.
func (f *fanout) listen(ctx context.Context) {
	eventCursor := func(ctx context.Context) (int64, error) {
		var id int64
		err := f.r.db.Read(ctx, func(tx *repo.Tx) error {
			c, err := repo.ServiceCounters(tx)
			id = c.EventID
			return err
		})
		return id, err
	}
	f.r.peers.listen(ctx, f.r.db, eventCursor, heard{
		events: func(events []service.Event, resync bool, cursor int64) {
			if resync {
				f.bus.resync(cursor)
			}
			f.bus.add(events)
		},
		others: func(events []service.Event, recheck bool) {
			if recheck {
				f.r.noteExpiry(math.MinInt64)
				f.waits.recheck()
			}
			for _, ev := range events {
				if ev.Kind == lk.EventGrant || ev.Kind == lk.EventRenew {
					f.r.noteExpiry(ev.ExpiresAt)
				}
			}
			f.waits.wake(events)
			f.lapse.poke()
		},
	})
}
