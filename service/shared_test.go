package service_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// listener collects what Listen hands over.
type listener struct {
	mu      sync.Mutex
	events  []service.Event
	resyncs int
}

func (l *listener) got(events []service.Event, resync bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, events...)
	if resync {
		l.resyncs++
	}
}

func (l *listener) state() ([]service.Event, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]service.Event(nil), l.events...), l.resyncs
}

// TestNotifications: what one service's transactions do to waiting clients
// reaches another service's listener, its own does not come back to it,
// and an event too large for a notification becomes a call to recheck.
func TestNotifications(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := testutil.OpenService(t, dsn), testutil.OpenService(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var la, lb listener
	go a.Listen(ctx, la.got)
	go b.Listen(ctx, lb.got)
	testutil.Eventually(t, 5*time.Second, "the listeners never started", func() bool {
		_, ra := la.state()
		_, rb := lb.state()
		return ra == 1 && rb == 1
	})

	mustAcquire := func(ts int64, client, lock string) {
		t.Helper()
		if _, err := a.Acquire(ctx, ts, client, lock, 10, lk.Exclusive); err != nil {
			t.Fatal(err)
		}
	}
	mustAcquire(0, "x", "L")
	mustAcquire(0, "y", "L")
	if _, err := a.Release(ctx, 1, "x", "L"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, "b never heard of the grants", func() bool {
		es, _ := lb.state()
		return len(es) == 2
	})
	es, _ := lb.state()
	if es[0].Kind != service.EventGranted || es[0].Client != "x" || es[1].Kind != service.EventGranted ||
		es[1].Client != "y" || es[1].Token != 2 || es[1].ExpiresAt != 11 || !es[1].FromQueue {
		t.Errorf("b heard %+v, want x's grant, then y's from the queue with token 2 until 11", es)
	}
	if es, _ := la.state(); len(es) != 0 {
		t.Errorf("a heard its own events: %+v", es)
	}

	big := strings.Repeat("\x01", 2000) // 12,000 bytes in JSON
	mustAcquire(2, "p", big)
	testutil.Eventually(t, 5*time.Second, "b was never told to recheck", func() bool {
		_, r := lb.state()
		return r == 2
	})
}
