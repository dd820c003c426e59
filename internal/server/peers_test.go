package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// Two servers on one PostgreSQL database, in this process, on one manual
// clock: what one server does must reach the blocked acquires the other
// one holds, and a lapse both notice is handed over once.

// tally counts the events a server's transactions caused.
type tally struct {
	mu     sync.Mutex
	counts map[lk.EventKind]int
}

func (o *tally) Committed(events []service.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range events {
		o.counts[e.Kind]++
	}
}
func (o *tally) GroupCommitted(engine.GroupStats) {}
func (o *tally) Ready(string)                     {}
func (o *tally) count(k lk.EventKind) int         { o.mu.Lock(); defer o.mu.Unlock(); return o.counts[k] }
func newTally() *tally                            { return &tally{counts: map[lk.EventKind]int{}} }

func startPair(t *testing.T, at int64) (a, b *fixture, ta, tb *tally) {
	t.Helper()
	return startPairWith(t, at, service.Config{})
}

// startPairWith is startPair with the rules' configuration.
func startPairWith(t *testing.T, at int64, rules service.Config) (a, b *fixture, ta, tb *tally) {
	t.Helper()
	dsn := pgtest.DSN(t)
	clock := engine.NewManualClock(time.Unix(at, 0))
	ta, tb = newTally(), newTally()
	a = startWith(t, dsn, clock, engine.Options{Observer: ta, Rules: rules})
	b = startWith(t, dsn, clock, engine.Options{Observer: tb, Rules: rules})
	return a, b, ta, tb
}

// TestPeersReleaseWakesOtherServer: a release on one server answers the
// blocked acquire held by the other.
func TestPeersReleaseWakesOtherServer(t *testing.T) {
	a, b, _, _ := startPair(t, 1000)
	_, v := a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 10})
	expect(t, v, granted(1, 1000, 1010))
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 30, "wait": 600})
	a.waitQueued("y")
	a.clock.Set(time.Unix(1004, 0))
	_, v = a.call("POST", "/v1/release", map[string]any{"client": "x", "lock": "L"})
	expect(t, v, `{"outcome": "released"}`)
	expect(t, receive(t, ch), granted(2, 1004, 1034))
}

// TestPeersLapseHandedOverOnce: both servers know when the lease ends (one
// granted it, the other heard of the grant), both lapse timers fire, and
// the lock is handed over exactly once, at the lease's end.
func TestPeersLapseHandedOverOnce(t *testing.T) {
	a, b, ta, tb := startPair(t, 1000)
	a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 10})
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 30, "wait": 600})
	a.waitQueued("y")
	testutil.Eventually(t, 5*time.Second, "server b never learnt of x's lease", func() bool {
		return b.eng.NextLapse() == 1010
	})
	a.clock.Set(time.Unix(1025, 0))
	expect(t, receive(t, ch), granted(2, 1010, 1040))
	_, v := b.call("GET", "/v1/inspect?lock=L", nil)
	expect(t, v, `{"lock": "L", "holders": [{"client": "y", "mode": "exclusive", "token": 2, "expires_at": 1040}], "queue": [], "holder_count": 1, "queue_length": 0}`)
	// The server that made the hand-over counts its events after its
	// commit, which the other may have heard of, and answered y, first:
	// wait for the counts to settle, then require them exact.
	counts := func() (lapsed, grants int) {
		return ta.count(lk.EventLapse) + tb.count(lk.EventLapse),
			ta.count(lk.EventGrant) + tb.count(lk.EventGrant)
	}
	testutil.Eventually(t, 5*time.Second, "the hand-over's events were never counted", func() bool {
		l, g := counts()
		return l >= 1 && g >= 2
	})
	time.Sleep(100 * time.Millisecond) // a second lapse or grant, if any, would show by now
	lapsed, grants := counts()
	if lapsed != 1 {
		t.Errorf("the lapse was reported %d times across both servers, want once", lapsed)
	}
	if grants != 2 {
		t.Errorf("%d grants across both servers, want 2 (x's, then y's at the hand-over)", grants)
	}
}

// TestPeersDeadlockVictimOnOtherServer: a deadlock found by one server
// aborts a client whose blocked acquire the other server holds. The
// servers explain, as serve's do: the victim's answer may come from the
// abort's notification or, when its server rechecks its waits (after its
// listener connects, under load), from the state it reads, which has the
// abort's explanation only where explanations are kept.
func TestPeersDeadlockVictimOnOtherServer(t *testing.T) {
	a, b, _, _ := startPairWith(t, 0, service.Config{Explain: true})
	a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L1", "ttl": 100})
	b.call("POST", "/v1/acquire", map[string]any{"client": "y", "lock": "L2", "ttl": 100})
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L1", "ttl": 100, "wait": 600})
	a.waitQueued("y")
	_, v := a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L2", "ttl": 100})
	const why = `[{"victim": "y", "age": 2, "cycle": [{"client": "x", "age": 1, "waits_for": "L2"}, {"client": "y", "age": 2, "waits_for": "L1"}]}]`
	expect(t, v, `{"outcome": "granted", "token": 2, "granted_at": 0, "expires_at": 100, "victims": ["y"], "aborts": `+why+`,
		"predecessors": [{"client": "y", "mode": "exclusive", "token": 1, "ended": "aborted", "ended_at": 0}]}`)
	expect(t, receive(t, ch), `{"outcome": "deadlock", "victims": ["y"], "aborts": `+why+`}`)
}

// TestPeersSurvivesLostConnection: PostgreSQL ends the server's
// connections (as a restart or a failover does). A request may then get
// 503 unavailable, never a wrong answer, and the server goes on
// with a new connection; blocked acquires are still woken, through a
// listener that reconnected too.
func TestPeersSurvivesLostConnection(t *testing.T) {
	ss, dsn := newSessions(t)
	clock := engine.NewManualClock(time.Unix(1000, 0))
	a := startWith(t, dsn, clock, engine.Options{})
	b := startWith(t, dsn, clock, engine.Options{})
	_, v := a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 100})
	expect(t, v, granted(1, 1000, 1100))

	listening := func() bool { return ss.listening() == 2 }
	testutil.Eventually(t, 5*time.Second, "the listeners never connected", listening)
	if killed := ss.terminate(); killed < 4 { // two servers, each with a connection and a listener
		t.Fatalf("terminated %d connections, want at least 4", killed)
	}

	expect(t, retry(a, "GET", "/v1/inspect?lock=L", nil), `{"lock": "L", "holders": [{"client": "x", "mode": "exclusive", "token": 1, "expires_at": 1100}], "queue": [], "holder_count": 1, "queue_length": 0}`)
	retry(b, "GET", "/v1/inspect?lock=L", nil)
	testutil.Eventually(t, 5*time.Second, "the listeners never reconnected", listening)
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 30, "wait": 600})
	a.waitQueued("y")
	expect(t, retry(a, "POST", "/v1/release", map[string]any{"client": "x", "lock": "L"}), `{"outcome": "released"}`)
	expect(t, receive(t, ch), granted(2, 1000, 1030))
}

// TestPeersStaleNewsOfEarlierWait: a client withdraws through one server
// and at once waits again, for the same lock, through the other. The news
// of the withdrawal reaches the second server after its new wait began; it
// concerns the earlier queue entry, and must not answer the new wait.
func TestPeersStaleNewsOfEarlierWait(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := engine.NewManualClock(time.Unix(1000, 0))
	a := startWith(t, dsn, clock, engine.Options{})
	b := startWith(t, dsn, clock, engine.Options{})
	a.call("POST", "/v1/acquire", map[string]any{"client": "holder", "lock": "L", "ttl": 600})
	_, v := a.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": "L", "ttl": 10})
	expect(t, v, `{"outcome": "queued", "position": 1}`)

	// Hold the lock every transaction takes, so that b's release and a's
	// acquire queue up behind it in that order.
	ctx := context.Background()
	conn, tx := pgtest.HoldServiceRow(t, dsn)
	released := make(chan any, 1)
	go func() {
		_, v := b.call("POST", "/v1/release", map[string]any{"client": "c", "lock": "L"})
		released <- v
	}()
	// The order is PostgreSQL's: each request is sent once the one before
	// it waits for the row, however long a busy machine takes to send it.
	pgtest.WaitersAtLeast(t, conn, 1)
	ch := a.acquireAsync(map[string]any{"client": "c", "lock": "L", "ttl": 10, "wait": 5})
	pgtest.WaitersAtLeast(t, conn, 2)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	expect(t, receive(t, released), `{"outcome": "withdrawn"}`)
	a.waitQueued("c")
	select {
	case v := <-ch:
		g, _ := json.Marshal(v)
		t.Fatalf("the new wait was answered %s by the news of the old one", g)
	case <-time.After(500 * time.Millisecond):
	}
	clock.Advance(6 * time.Second)
	expect(t, receive(t, ch), `{"outcome": "queued", "position": 1}`)
}

// TestPeersSkewedClocks: two servers whose clocks are an hour apart, both
// taking time from the database, answer with the database's time, agree on
// when a lease ends, and hand it over at that instant: one grants, the
// other's lapse timer, set by its own clock, retires it.
func TestPeersSkewedClocks(t *testing.T) {
	dsn := pgtest.DSN(t)
	now := time.Now()
	a := startWith(t, dsn, engine.NewManualClock(now.Add(-time.Hour)), engine.Options{TimeFromDatabase: true})
	b := startWith(t, dsn, engine.NewManualClock(now.Add(time.Hour)), engine.Options{TimeFromDatabase: true})
	// Timed around the call itself: the servers' start may take seconds
	// on a busy machine.
	sent := time.Now()
	// ttl 5: the lease runs on real time, and y must be queued through b
	// before it ends, also on a busy machine under -race.
	_, v := a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 5})
	answered := time.Now()
	res := as[lk.AcquireResult](t, v)
	if res.Outcome != lk.Granted || res.Token != 1 || res.ExpiresAt != res.GrantedAt+5 {
		t.Fatalf("acquire through a: %v", v)
	}
	expires := res.ExpiresAt
	if expires < sent.Unix()+4 || expires > answered.Unix()+6 {
		t.Fatalf("expires_at %d, sent at %d and answered at %d: want the database's time plus 5", expires, sent.Unix(), answered.Unix())
	}
	ch := b.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 30, "wait": 60})
	b.waitQueued("y")
	// The manual clocks run at the pace of real time, an hour apart: b's
	// is an hour ahead, yet its timer waits for the database's time to
	// reach expires_at.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				a.clock.Advance(20 * time.Millisecond)
				b.clock.Advance(20 * time.Millisecond)
			}
		}
	}()
	// receive's 5 s, counted from the lease's end, not from now.
	got := receiveWithin(t, ch, time.Until(time.Unix(expires, 0))+5*time.Second)
	if early := time.Unix(expires, 0).Sub(time.Now()); early > 100*time.Millisecond {
		t.Errorf("handed over %v before the lease ended", early)
	}
	expect(t, got, granted(2, expires, expires+30))
}

// TestPeersWaitSurvivesLostConnection: PostgreSQL ends the server's
// connections while a client's acquire is blocked. The listener reconnects
// and the wait reads its state, through a connection that is gone too at
// first: the client is still queued, so the wait goes on, and is granted
// when the lock is released.
func TestPeersWaitSurvivesLostConnection(t *testing.T) {
	ss, dsn := newSessions(t)
	a := startWith(t, dsn, engine.NewManualClock(time.Unix(1000, 0)), engine.Options{})
	a.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 100})
	ch := a.acquireAsync(map[string]any{"client": "y", "lock": "L", "ttl": 30, "wait": 600})
	a.waitQueued("y")
	listening := func() bool { return ss.listening() == 1 }
	testutil.Eventually(t, 5*time.Second, "the listener never connected", listening)
	ss.terminate()
	testutil.Eventually(t, 5*time.Second, "the listener never reconnected", listening)
	select {
	case v := <-ch:
		g, _ := json.Marshal(v)
		t.Fatalf("the blocked acquire was answered %s while its client is still queued", g)
	case <-time.After(500 * time.Millisecond):
	}
	expect(t, retry(a, "POST", "/v1/release", map[string]any{"client": "x", "lock": "L"}), `{"outcome": "released"}`)
	expect(t, receive(t, ch), granted(2, 1000, 1030))
}

// TestPeersLeavesReadOnlySession: after a failover a server may reach a
// database that takes no writes (a standby, or here a database made read
// only). Its answers are 503 meanwhile, and once the database takes writes
// again it goes on, though its read-only connection still answered pings:
// a connection refused a write is replaced, not kept.
func TestPeersLeavesReadOnlySession(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	name := fmt.Sprintf("lkro_%d", time.Now().UnixNano())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)") })
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	f := startWith(t, u.String(), engine.NewManualClock(time.Unix(1000, 0)), engine.Options{})
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "x", "lock": "L", "ttl": 100})
	expect(t, v, granted(1, 1000, 1100))

	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, name); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		status, v := f.call("GET", "/v1/inspect?lock=L", nil)
		if status != http.StatusServiceUnavailable {
			t.Fatalf("on a read-only database: HTTP %d %v, want 503", status, v)
		}
		expectError(t, status, v, lk.CodeUnavailable)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+name+" RESET default_transaction_read_only"); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		status, v := f.call("GET", "/v1/inspect?lock=L", nil)
		if status == http.StatusOK {
			expect(t, v, `{"lock": "L", "holders": [{"client": "x", "mode": "exclusive", "token": 1, "expires_at": 1100}], "queue": [], "holder_count": 1, "queue_length": 0}`)
			break
		}
		if i == 20 {
			t.Fatalf("still HTTP %d %v after the database took writes again", status, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sessions watches, and ends, the PostgreSQL sessions of the servers of one
// test: those on the URL newSessions returns, which names them.
type sessions struct {
	t    *testing.T
	conn *pgx.Conn
	app  string
}

func newSessions(t *testing.T) (ss *sessions, dsn string) {
	t.Helper()
	ss = &sessions{t: t, app: fmt.Sprintf("lktest_%d", time.Now().UnixNano())}
	conn, err := pgx.Connect(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	ss.conn = conn
	t.Cleanup(func() { conn.Close(context.Background()) })
	return ss, pgtest.DSN(t) + "&application_name=" + ss.app
}

// listening counts the servers' listening connections.
func (ss *sessions) listening() int {
	var n int
	ss.conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, ss.app).Scan(&n)
	return n
}

// terminate ends every session of the servers, as a restart of PostgreSQL
// would, and says how many there were.
func (ss *sessions) terminate() int {
	ss.t.Helper()
	var n int
	if err := ss.conn.QueryRow(context.Background(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid)
		FROM pg_stat_activity WHERE application_name = $1) k`, ss.app).Scan(&n); err != nil {
		ss.t.Fatal(err)
	}
	return n
}

// retry sends a request until it is answered other than 503, the only
// failure allowed while a server's database connections are replaced.
func retry(f *fixture, method, path string, body map[string]any) any {
	f.t.Helper()
	for i := 0; i < 10; i++ {
		status, v := f.call(method, path, body)
		if status != http.StatusServiceUnavailable {
			return v
		}
		expectError(f.t, status, v, lk.CodeUnavailable)
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("%s %s: still unavailable after 10 tries", method, path)
	return nil
}
