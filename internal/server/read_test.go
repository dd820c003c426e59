package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the blocker
	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// startServer is start on the database at path, also returning its engine
// (for its Counts).
func startServer(t *testing.T, path string, at int64) (*fixture, *engine.Engine) {
	t.Helper()
	f := startOn(t, path, at)
	return f, f.eng
}

// blockWriters holds, from a connection of its own, the lock every write
// transaction on the database at path takes first (SQLite's write lock,
// PostgreSQL's service row), until the returned function is called: the
// server's committer then waits for it, or gives up with an error after
// its lock timeout (10 s), which is what happened to reads that went
// through it.
func blockWriters(t *testing.T, path string) (unblock func()) {
	t.Helper()
	ctx := context.Background()
	driver, dsn, begin := "sqlite", "file:"+path+"?_pragma=busy_timeout(10000)", []string{"BEGIN IMMEDIATE"}
	if repo.IsPostgres(path) {
		driver, dsn, begin = "pgx", path, []string{"BEGIN", "SELECT 1 FROM service WHERE id = 1 FOR UPDATE"}
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range begin {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var once sync.Once
	unblock = func() {
		once.Do(func() {
			conn.ExecContext(ctx, "ROLLBACK")
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(unblock) // before the server stops: cleanups run last first
	return unblock
}

// TestReadsApartFromCommitter: with the committer stuck behind another
// writer (a long transaction), the locks listing, status and the metrics'
// counts still answer, from the last commit. A lease past its expires_at
// that the lapse timer could not retire yet is left out of all three.
// (Before, each went through the committer and failed after its 10 s lock
// timeout.)
func TestReadsApartFromCommitter(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f, srv := startServer(t, path, 1000)
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L1", "ttl": 10})
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L2", "ttl": 1000})
		_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L2", "ttl": 10})
		expect(t, v, `{"outcome": "queued", "position": 1}`)

		unblock := blockWriters(t, path)
		// a's lease on L1 ended at 1010: the lapse timer fires, and its
		// retirement waits behind the blocker.
		f.clock.Set(time.Unix(1015, 0))
		l2 := `{"lock": "L2", "mode": "exclusive", "token": 1, "expires_at": 2000}`
		check := func() {
			t.Helper()
			_, v := f.call("GET", "/v1/status?client=a", nil)
			expect(t, v, `{"client": "a", "age": 1, "holds": [`+l2+`], "waiting": null, "next": null}`)
			_, v = f.call("GET", "/v1/status?client=b", nil)
			expect(t, v, `{"client": "b", "age": 2, "holds": [], "waiting": {"lock": "L2", "position": 1}, "next": null}`)
			_, v = f.call("GET", "/v1/locks", nil)
			expect(t, v, `{"locks": [{"lock": "L2", "holders": [{"client": "a", "mode": "exclusive", "token": 1, "expires_at": 2000}], "waiting": 1, "oldest_wait_s": 15, "holder_count": 1}], "next": null}`)
			g, err := srv.Gauges(context.Background())
			held, waiting := g.Held, g.Waiting
			if err != nil || held != 1 || waiting != 1 {
				t.Errorf("Counts: %d held, %d waiting, %v; want 1, 1, nil", held, waiting, err)
			}
		}
		check()

		// Once the blocker is gone the committer retires the lapse: the
		// answers stay the same, now from the tables.
		unblock()
		_, v = f.call("GET", "/v1/inspect?lock=L1", nil) // through the committer, after the lapse
		expect(t, v, `{"lock": "L1", "holders": [], "queue": [], "holder_count": 0, "queue_length": 0}`)
		check()
	})
}

// TestStatusPages: the holds of a client holding 5,000 locks come 100 to a
// page by default, and following next reads each exactly once, in order.
// (Before, one answer held all 5,000.)
func TestStatusPages(t *testing.T) {
	const n = 5000
	path := filepath.Join(t.TempDir(), "server.db")
	ctx := context.Background()
	svc, err := engine.OpenDirect(ctx, path, repo.Options{}, service.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	err = svc.Group(ctx, func() {
		for i := range n {
			res, err := svc.Acquire(ctx, 1000, lk.AcquireRequest{Client: "a", Lock: fmt.Sprintf("L%05d", i), TTL: 3600, Mode: lk.Exclusive})
			if err == nil && res.Outcome != lk.Granted {
				err = fmt.Errorf("acquire %d: %s", i, res.Outcome)
			}
			if err != nil && failed == nil {
				failed = err
			}
		}
	})
	if err == nil {
		err = failed
	}
	if cerr := svc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f, _ := startServer(t, path, 1000)

	get := func(q string) (int, lk.StatusResult) {
		t.Helper()
		status, v := f.call("GET", "/v1/status?client=a"+q, nil)
		var res lk.StatusResult
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		return status, res
	}
	for _, c := range []struct {
		limit string // "" for the default
		size  int
	}{{"", 100}, {"1000", 1000}, {"7", 7}} {
		seen, pages, after := 0, 0, ""
		for {
			q := ""
			if c.limit != "" {
				q += "&limit=" + c.limit
			}
			if after != "" {
				q += "&after=" + url.QueryEscape(after)
			}
			status, res := get(q)
			if status != http.StatusOK || res.Age != 1 || res.Waiting != nil {
				t.Fatalf("limit %q after %q: HTTP %d %+v", c.limit, after, status, res)
			}
			pages++
			for _, h := range res.Holds {
				if want := fmt.Sprintf("L%05d", seen); h.Lock != want || h.Token != 1 || h.ExpiresAt != 4600 {
					t.Fatalf("limit %q: hold %d is %+v, want %s", c.limit, seen, h, want)
				}
				seen++
			}
			if res.Next == nil {
				if len(res.Holds) > c.size {
					t.Fatalf("limit %q: a last page of %d holds", c.limit, len(res.Holds))
				}
				break
			}
			if len(res.Holds) != c.size || *res.Next != res.Holds[len(res.Holds)-1].Lock {
				t.Fatalf("limit %q: a page of %d holds with next %q", c.limit, len(res.Holds), *res.Next)
			}
			after = *res.Next
		}
		if seen != n || pages != (n+c.size-1)/c.size {
			t.Errorf("limit %q: %d holds in %d pages, want %d in %d", c.limit, seen, pages, n, (n+c.size-1)/c.size)
		}
	}
	for _, limit := range []string{"0", "1001", "-1", "1.0", "x"} {
		status, v := f.call("GET", "/v1/status?client=a&limit="+limit, nil)
		expectError(t, status, v, lk.CodeInvalidArguments, "limit")
	}
	_, v := f.call("GET", "/v1/status?client=a&after=L04999", nil)
	expect(t, v, `{"client": "a", "age": 1, "holds": [], "waiting": null, "next": null}`)
}

// TestReadsInMemory: an in-memory database has no connection apart from the
// committer's; status and locks are answered through the committer, with
// the same pages.
func TestReadsInMemory(t *testing.T) {
	f, srv := startServer(t, repo.MemoryPath, 1000)
	for _, l := range []string{"A", "B", "C"} {
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": l, "ttl": 30})
	}
	hold := func(l string) string {
		return `{"lock": "` + l + `", "mode": "exclusive", "token": 1, "expires_at": 1030}`
	}
	_, v := f.call("GET", "/v1/status?client=a&limit=2", nil)
	expect(t, v, `{"client": "a", "age": 1, "holds": [`+hold("A")+`, `+hold("B")+`], "waiting": null, "next": "B"}`)
	_, v = f.call("GET", "/v1/status?client=a&limit=2&after=B", nil)
	expect(t, v, `{"client": "a", "age": 1, "holds": [`+hold("C")+`], "waiting": null, "next": null}`)
	_, v = f.call("GET", "/v1/locks?limit=2", nil)
	if m, _ := v.(map[string]any); m == nil || m["next"] != "B" {
		t.Errorf("locks?limit=2: %v", v)
	}
	if g, err := srv.Gauges(context.Background()); g.Held != 3 || g.Waiting != 0 || err != nil {
		t.Errorf("Gauges: %+v, %v; want 3 held, 0 waiting", g, err)
	}
}

// TestReadsWaitForHandOver: when a lease has ended with clients waiting for
// its lock, the retirement that hands the lock over decides what the
// listing and the waiter's status say. Until it is done they are not
// answered apart (a lock with waiters and no holder is a state the contract
// never shows), but after it, through the committer. (Before, the listing
// answered at once with holders [] and 1 waiting.)
func TestReadsWaitForHandOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.db")
	f, _ := startServer(t, path, 1000)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 100})
	unblock := blockWriters(t, path)
	f.clock.Set(time.Unix(1015, 0)) // a's lease ended at 1010: L goes to b at 1010
	type answer struct {
		path string
		v    any
	}
	answers := make(chan answer, 2)
	for _, p := range []string{"/v1/locks", "/v1/status?client=b"} {
		go func() {
			_, v := f.call("GET", p, nil)
			answers <- answer{p, v}
		}()
	}
	want := map[string]string{
		"/v1/locks":           `{"locks": [{"lock": "L", "holders": [{"client": "b", "mode": "exclusive", "token": 2, "expires_at": 1110}], "waiting": 0, "holder_count": 1}], "next": null}`,
		"/v1/status?client=b": `{"client": "b", "age": 2, "holds": [{"lock": "L", "mode": "exclusive", "token": 2, "expires_at": 1110}], "waiting": null, "next": null}`,
	}
	got := 0
	// An answer while the retirement cannot commit would be early: give
	// the requests time to reach the server before letting it commit.
	for early := time.After(time.Second); got < 2; got++ {
		select {
		case a := <-answers:
			t.Errorf("%s answered before the hand-over was committed", a.path)
			expect(t, a.v, want[a.path])
			continue
		case <-early:
		}
		break
	}
	unblock()
	for ; got < 2; got++ {
		a := <-answers
		expect(t, a.v, want[a.path])
	}
}
