package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// TestEventsTruncatedOnPeers: with servers on PostgreSQL, a grant whose
// predecessors (60 shared readers with 250-byte names) would overflow a
// notification still reaches every stream, with its id, lock, client,
// token and mode, its predecessors cut to what fits and "truncated": true;
// no reset.
func TestEventsTruncatedOnPeers(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startWhy(t, dsn, 1000, server.Options{})
	b := startWhy(t, dsn, 1000, server.Options{})
	st := openEvents(t, b.url, "", nil)
	settle(t, a, st)
	st.quiet(200 * time.Millisecond)

	lock := strings.Repeat("L", 250)
	const readers = 60
	for i := range readers {
		c := fmt.Sprintf("%03d%s", i, strings.Repeat("r", 247))
		a.call("POST", "/v1/acquire", map[string]any{"client": c, "lock": lock, "ttl": 10, "mode": "shared"})
	}
	a.clock.Set(time.Unix(1020, 0))
	writer := strings.Repeat("w", 256)
	a.call("POST", "/v1/acquire", map[string]any{"client": writer, "lock": lock, "ttl": 10})
	for {
		e := st.next(10 * time.Second)
		d := e.decoded(t)
		if e.event == "reset" {
			t.Fatalf("the stream got a reset (id line %q): %s", e.id, e.data)
		}
		if d.Kind != "grant" || d.Client == nil || *d.Client != writer {
			continue
		}
		if e.id == "" || e.id != strconv.FormatInt(d.ID, 10) || d.Lock != lock || d.Token != readers+1 || d.Mode != "exclusive" {
			t.Errorf("the writer's grant: id line %q, %s", e.id, e.data)
		}
		if !d.Truncated || len(d.Predecessors) == 0 || len(d.Predecessors) >= readers {
			t.Errorf("the writer's grant has truncated %v and %d predecessors, want true and 1..%d", d.Truncated, len(d.Predecessors), readers-1)
		}
		if len(e.data) > 8000 {
			t.Errorf("the writer's grant is %d bytes", len(e.data))
		}
		return
	}
}

// TestTruncatedGrantAnswersWhole: a blocked acquire on one server, granted
// by another server's release with an event too large for a notification,
// still answers with every predecessor (read from the grant history).
func TestTruncatedGrantAnswersWhole(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := startWhy(t, dsn, 1000, server.Options{})
	b := startWhy(t, dsn, 1000, server.Options{})
	lock := strings.Repeat("M", 250)
	const readers = 60
	var names []string
	for i := range readers {
		c := fmt.Sprintf("%03d%s", i, strings.Repeat("r", 247))
		names = append(names, c)
		a.call("POST", "/v1/acquire", map[string]any{"client": c, "lock": lock, "ttl": 60, "mode": "shared"})
	}
	writer := strings.Repeat("w", 256)
	ch := b.acquireAsync(map[string]any{"client": writer, "lock": lock, "ttl": 10, "wait": 30})
	b.waitQueued(writer)
	for _, c := range names {
		a.call("POST", "/v1/release", map[string]any{"client": c, "lock": lock})
	}
	select {
	case v := <-ch:
		res := v.(map[string]any)
		ps, _ := res["predecessors"].([]any)
		if res["outcome"] != "granted" || len(ps) != readers {
			t.Errorf("the writer's answer has outcome %v and %d predecessors, want granted and %d", res["outcome"], len(ps), readers)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the writer was not answered")
	}
}
