package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// listener collects what a peerLink's listen hands over of the other
// servers' events.
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
// reaches another service's listener on the same database and schema, not
// one in another schema, and not its own; an event too large for a
// notification becomes a call to recheck.
func TestNotifications(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := openTestRunner(t, dsn), openTestRunner(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// other is another deployment, in another schema of the same database:
	// PostgreSQL's channels are per database, yet it must hear nothing.
	other := openTestRunner(t, pgtest.DSN(t))
	var la, lb, lo listener
	go listenTo(ctx, a, &la)
	go listenTo(ctx, b, &lb)
	go listenTo(ctx, other, &lo)
	eventually(t, 5*time.Second, "the listeners never started", func() bool {
		_, ra := la.state()
		_, rb := lb.state()
		_, ro := lo.state()
		return ra == 1 && rb == 1 && ro == 1
	})

	mustAcquire := func(ts int64, client, lock string) {
		t.Helper()
		if _, err := exec(a, ctx, ts, lk.AcquireRequest{Client: client, Lock: lock, TTL: 10, Mode: lk.Exclusive}, service.Acquire); err != nil {
			t.Fatal(err)
		}
	}
	mustAcquire(0, "x", "L")
	mustAcquire(0, "y", "L")
	if _, err := exec(a, ctx, 1, lk.ReleaseRequest{Client: "x", Lock: "L"}, service.Release); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b never heard of the grants", func() bool {
		es, _ := lb.state()
		return len(es) >= 2
	})
	time.Sleep(50 * time.Millisecond) // for any event there should not be
	es, _ := lb.state()
	if len(es) != 2 || es[0].Kind != lk.EventGrant || es[0].Client != "x" || es[1].Kind != lk.EventGrant ||
		es[1].Client != "y" || es[1].Token != 2 || es[1].ExpiresAt != 11 || !es[1].FromQueue {
		t.Errorf("b heard %+v, want x's grant, then y's from the queue with token 2 until 11", es)
	}
	if es, _ := la.state(); len(es) != 0 {
		t.Errorf("a heard its own events: %+v", es)
	}
	if es, _ := lo.state(); len(es) != 0 {
		t.Errorf("a service in another schema heard a's events: %+v", es)
	}

	big := strings.Repeat("\x01", 2000) // 12,000 bytes in JSON
	mustAcquire(2, "p", big)
	eventually(t, 5*time.Second, "b was never told to recheck", func() bool {
		_, r := lb.state()
		return r == 2
	})
}

// openTestRunner opens a runner on the database at dsn, closed when the
// test ends.
func openTestRunner(t *testing.T, dsn string) *runner {
	t.Helper()
	r, err := openRunner(context.Background(), dsn, repo.Options{}, service.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.close() })
	return r
}

// listenTo hears r's peers into l until ctx ends.
func listenTo(ctx context.Context, r *runner, l *listener) {
	r.peers.listen(ctx, r.db, func(context.Context) (int64, error) { return 0, nil }, heard{
		events: func([]service.Event, bool, int64) {},
		others: l.got,
	})
}

// eventually polls cond every 20ms until it holds, failing the test with
// what after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
