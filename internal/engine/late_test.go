package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// transactions records the events of each transaction an engine
// committed.
type transactions struct {
	mu  sync.Mutex
	txs [][]service.Event
}

func (r *transactions) Committed(events []service.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.txs = append(r.txs, append([]service.Event(nil), events...))
}
func (r *transactions) GroupCommitted(GroupStats) {}
func (r *transactions) Ready(string)              {}

// of returns the client names of the events of kind in the transaction
// that granted lock to client, in their order.
func (r *transactions) of(client, lock string, kind lk.EventKind) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tx := range r.txs {
		for _, e := range tx {
			if e.Kind == lk.EventGrant && e.Client == client && e.Lock == lock {
				var names []string
				for _, e := range tx {
					if e.Kind == kind {
						names = append(names, e.Client)
					}
				}
				return names
			}
		}
	}
	return nil
}

// with returns the events of the transaction in which client had an event
// of kind on lock, nil if none had.
func (r *transactions) with(client, lock string, kind lk.EventKind) []service.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tx := range r.txs {
		for _, e := range tx {
			if e.Kind == kind && e.Client == client && e.Lock == lock {
				return tx
			}
		}
	}
	return nil
}

// answer is an acquire's answer.
type answer struct {
	res lk.AcquireResult
	err error
}

// acquireAsync sends req from a goroutine of its own, so that the test can
// go on while it waits in the committer; its answer comes on the channel.
func acquireAsync(ctx context.Context, e *Engine, req lk.AcquireRequest) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		res, err := e.Acquire(ctx, req, 0)
		ch <- answer{res, err}
	}()
	return ch
}

// timers is how many timers wait for the clock to move.
func (c *ManualClock) timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// quietEngine opens an engine on dsn whose groups send nothing of their
// own: its clock does not move, and a lease that outlives the test has set
// the lapse timer for its end (the timer sweeps at once while it does not
// know the next expiry). Its groups wait for the service row longer than
// the writer's 2 s (up to the transaction's 15 s deadline), so that a busy
// machine cannot time them out while a test sends their late calls.
func quietEngine(t *testing.T, dsn string, obs Observer) *Engine {
	t.Helper()
	return quietEngineWith(t, dsn, Options{Observer: obs})
}

// quietEngineWith is quietEngine with opts, whose Clock it sets. With
// opts.TimeFromDatabase its operations' time is the database's clock, as
// a server's, while its lapse timer still waits on the clock that does
// not move.
func quietEngineWith(t *testing.T, dsn string, opts Options) *Engine {
	t.Helper()
	clock := NewManualClock(time.Unix(1000, 0))
	opts.Clock = clock
	e, err := Open(context.Background(), dsn+"&lock_timeout=60s", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, err := e.Acquire(context.Background(), lk.AcquireRequest{Client: "w", Lock: "W", TTL: 300, Mode: lk.Exclusive}, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the lapse timer was never set for the lease's end", func() bool {
		return clock.timers() >= 1 && len(e.com.calls) == 0
	})
	return e
}

// TestLateCallsJoinTheGroup: on a database with peers, the calls that come
// while a group waits for the service row's lock (another server's group
// holds it) run in that group, after its own and in the order they came,
// and are answered with its commit.
func TestLateCallsJoinTheGroup(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var txs transactions
	e := quietEngine(t, dsn, &txs)

	// The other server's group: a transaction that holds the row.
	conn, tx := pgtest.HoldServiceRow(t, dsn)
	const late = 8
	results := make([]<-chan answer, late+1)
	acquire := func(i int) {
		results[i] = acquireAsync(ctx, e, lk.AcquireRequest{Client: fmt.Sprint("c", i), Lock: "L", TTL: 30, Mode: lk.Exclusive})
	}
	acquire(0)
	pgtest.WaitersAtLeast(t, conn, 1)
	if n := len(e.com.calls); n != 0 {
		t.Fatalf("%d calls not taken by the group that waits", n)
	}
	// One at a time, so that their order is known.
	for i := 1; i <= late; i++ {
		acquire(i)
		eventually(t, 10*time.Second, "a call never reached the committer", func() bool { return len(e.com.calls) == i })
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-results[0]; a.err != nil || a.res.Outcome != lk.Granted {
		t.Errorf("c0: %+v %v, want granted", a.res, a.err)
	}
	for i := 1; i <= late; i++ {
		if a := <-results[i]; a.err != nil || a.res.Outcome != lk.Queued || a.res.Position != int64(i) {
			t.Errorf("c%d: %+v %v, want queued at %d", i, a.res, a.err, i)
		}
	}
	want := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	if got := txs.of("c0", "L", lk.EventQueue); !slices.Equal(got, want) {
		t.Errorf("queued in the transaction that granted L to c0: %v, want %v", got, want)
	}
}

// TestLateCallsReadTheClock: on a database with peers, where ts is the
// database's clock as a group read it, the operations a group takes late
// get the clock read again, not the one of the group's start, which is
// older than their requests.
func TestLateCallsReadTheClock(t *testing.T) {
	ctx := context.Background()
	r := openTestRunner(t, pgtest.DSN(t))
	err := r.groupRun(ctx, nil, func() {
		start, ok := r.databaseTime()
		if !ok {
			t.Fatal("no database time in a group on PostgreSQL")
		}
		time.Sleep(1100 * time.Millisecond) // the group's own operations run
		r.lateStart(nil)
		if now, _ := r.databaseTime(); now < start+1.1 {
			t.Errorf("the late operations' clock is %.3f, %.3f s after the group's start; want at least 1.1", now, now-start)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLateCallsGetTheirOwnTime: on a database with peers, where the
// server's time is the database's clock, acquires that arrive over a
// second after a group read that clock, while its own operation still
// runs, join it as late calls and get leases that start no earlier than
// their requests: granted at the second the database's clock was in when
// they were sent or later, so that none ends more than 1 s before its
// request's moment plus its ttl (docs/api.md), not at the group's older
// time. The group's own operation is held mid-way, after the clock read:
// an acquire by a new client that queues, whose registration (a write,
// pipelined) goes out with the reads of its way into the queue (the
// estimate of its wait) and waits there for another session's
// uncommitted registration of the same client.
func TestLateCallsGetTheirOwnTime(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var txs transactions
	// Answers that say why, as serve has them: a way into the queue reads
	// the estimate of its wait.
	e := quietEngineWith(t, dsn, Options{Observer: &txs, TimeFromDatabase: true, Rules: service.Config{Explain: true}})
	if res, err := e.Acquire(ctx, lk.AcquireRequest{Client: "h", Lock: "Q", TTL: 300, Mode: lk.Exclusive}, 0); err != nil || res.Outcome != lk.Granted {
		t.Fatalf("h's acquire of Q: %+v %v", res, err)
	}

	// The other session: its registration of q, not committed, holds the
	// key that the group's INSERT of q waits for.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO clients (name, age, registered_at) VALUES ('q', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	// dbClock reads the database's clock, as the groups do.
	dbClock := func() float64 {
		t.Helper()
		var now float64
		if err := tx.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp())::float8`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}

	// The group: q's acquire, which queues behind h.
	own := acquireAsync(ctx, e, lk.AcquireRequest{Client: "q", Lock: "Q", TTL: 30, Mode: lk.Exclusive})
	pgtest.WaitersAtLeast(t, conn, 1)
	// The group waits, its clock read: over a second passes, by the
	// database's clock, before the late requests are sent.
	blocked := dbClock()
	sent := blocked
	for sent < blocked+1.1 {
		time.Sleep(20 * time.Millisecond)
		sent = dbClock()
	}
	const late, ttl = 4, 30
	results := make([]<-chan answer, late)
	for i := range late {
		results[i] = acquireAsync(ctx, e, lk.AcquireRequest{Client: fmt.Sprint("c", i), Lock: fmt.Sprint("L", i), TTL: ttl, Mode: lk.Exclusive})
	}
	eventually(t, 10*time.Second, "the late calls never reached the committer", func() bool { return len(e.com.calls) == late })
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	if a := <-own; a.err != nil || a.res.Outcome != lk.Queued || a.res.Position != 1 {
		t.Fatalf("q's acquire: %+v %v, want queued at 1", a.res, a.err)
	}
	group := txs.with("q", "Q", lk.EventQueue)
	if group == nil {
		t.Fatal("no committed transaction queued q")
	}
	groupTS := group[0].At
	for _, ev := range group {
		if ev.Kind == lk.EventQueue && ev.Client == "q" {
			groupTS = ev.At
		}
	}
	// The setup: the group's own operation has the time of a clock read
	// before it waited.
	if groupTS > int64(math.Floor(blocked)) {
		t.Fatalf("q's queue entry at %d, after the clock read once the group waited (%.3f): the group read no clock before it waited", groupTS, blocked)
	}
	granted := map[string]int64{} // the late grants of the group, by lock
	for _, ev := range group {
		if ev.Kind == lk.EventGrant {
			granted[ev.Lock] = ev.At
		}
	}
	stored := map[string]int64{} // the leases' rows
	rows, err := conn.Query(ctx, `SELECT lock, granted_at FROM leases WHERE client LIKE 'c%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var lock string
		var at int64
		if err := rows.Scan(&lock, &at); err != nil {
			t.Fatal(err)
		}
		stored[lock] = at
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	second := int64(math.Floor(sent)) // the requests' second, or earlier
	t.Logf("the group's own time %d; the late requests sent at %.3f (%.3f s after it waited); their grants %v", groupTS, sent, sent-blocked, granted)
	for i := range late {
		c, l := fmt.Sprint("c", i), fmt.Sprint("L", i)
		a := <-results[i]
		res := a.res
		if a.err != nil || res.Outcome != lk.Granted {
			t.Errorf("%s: %+v %v, want granted", c, res, a.err)
			continue
		}
		at, ok := granted[l]
		if !ok {
			t.Errorf("%s's acquire did not join q's group as a late call (nothing tested)", c)
			continue
		}
		if at != res.GrantedAt || stored[l] != res.GrantedAt {
			t.Errorf("%s's lease: granted at %d in its answer, %d in its event, %d in its row", c, res.GrantedAt, at, stored[l])
		}
		if res.GrantedAt < second {
			t.Errorf("%s's lease, a late call of the group, granted at %d (the group's own time %d, +%d s): its request was sent %.3f s after the group waited, at %.3f by the database's clock; want at least %d, and an end no earlier than %.3f (its request's moment plus its ttl, less 1 s), not %d",
				c, res.GrantedAt, groupTS, res.GrantedAt-groupTS, sent-blocked, sent, second, sent+ttl-1, res.ExpiresAt)
		}
	}
}

// TestLateCallsAfterAFailedGroup: when the round trip that readies a group
// for its late calls fails (here, a write of the group's own operation,
// which goes with it), the group is lost, and the late calls, which have
// not run, go to the next group instead of failing with it.
func TestLateCallsAfterAFailedGroup(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	e := quietEngine(t, dsn, nil)
	conn, tx := pgtest.HoldServiceRow(t, dsn)
	failed := make(chan error, 1)
	go func() {
		// A write that the database refuses (mode outside its CHECK),
		// queued: it is sent with the group's next round trip.
		failed <- e.com.submit(ctx, "bad", func(context.Context, int64) error {
			return repo.QueueAppend(e.r.group, repo.QueueEntry{Lock: "B", Position: 1, Client: "b", Mode: "bogus", TTL: 1, QueuedAt: 1000})
		})
	}()
	pgtest.WaitersAtLeast(t, conn, 1)
	const late = 3
	results := make([]<-chan answer, late)
	for i := range late {
		results[i] = acquireAsync(ctx, e, lk.AcquireRequest{Client: fmt.Sprint("c", i), Lock: fmt.Sprint("L", i), TTL: 30, Mode: lk.Exclusive})
		eventually(t, 10*time.Second, "a call never reached the committer", func() bool { return len(e.com.calls) == i+1 })
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-failed; err == nil {
		t.Error("the refused write's group committed")
	}
	for i := range late {
		if a := <-results[i]; a.err != nil {
			t.Errorf("late acquire %d failed with the group it joined: %v", i, a.err)
		}
	}
}
