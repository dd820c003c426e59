package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestGrantToken(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		token  int64
		ok     bool
	}{
		{200, `{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`, 7, true},
		{200, `{"outcome":"granted","granted_at":1,"expires_at":31,"token":12345678901}` + "\n", 12345678901, true},
		{200, `{"expires_at":31, "outcome": "granted", "token": 3}`, 3, true}, // decoded
		{200, `{"outcome":"queued","position":2}`, 0, false},
		{200, `{"outcome":"granted","token":0,"expires_at":31}`, 0, false},
		{409, `{"error":"client_busy","message":"..."}`, 0, false},
		{503, `{"outcome":"granted","token":7}`, 0, false},
		{200, `not json`, 0, false},
	} {
		token, ok := grantToken(tc.status, []byte(tc.body))
		if token != tc.token || ok != tc.ok {
			t.Errorf("grantToken(%d, %s) = %d, %v; want %d, %v", tc.status, tc.body, token, ok, tc.token, tc.ok)
		}
	}
}

func TestReleased(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
	}{
		{200, `{"outcome":"released"}`, true},
		{200, `{ "outcome": "released" }` + "\n", true},
		{200, `{"outcome":"withdrawn"}`, false},
		{409, `{"error":"not_holder","message":"..."}`, false},
	} {
		if got := released(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("released(%d, %s) = %v, want %v", tc.status, tc.body, got, tc.want)
		}
	}
}

func TestRequestBodies(t *testing.T) {
	w := &lkWorker{client: "c3", spec: pairSpec{ttl: 30, wait: time.Minute}}
	if got := string(w.request("n17", true)); got != `{"client":"c3","lock":"n17","ttl":30,"wait":60}` {
		t.Errorf("acquire body %s", got)
	}
	if got := string(w.request("hot", false)); got != `{"client":"c3","lock":"hot"}` {
		t.Errorf("release body %s", got)
	}
}

// TestHTTPConn runs the client against Go's HTTP server on loopback: one
// connection for many requests, answers read whole, a connection the
// server closes dialled again.
func TestHTTPConn(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprintf(w, `{"path":%q,"body":%s,"type":%q}`, r.URL.Path, body, r.Header.Get("Content-Type"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newHTTPConn(strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
	defer c.close()
	for i := range 3 {
		status, body, err := c.post("/v1/acquire", []byte(fmt.Sprintf(`{"n":%d}`, i)))
		want := fmt.Sprintf(`{"path":"/v1/acquire","body":{"n":%d},"type":"application/json"}`, i)
		if err != nil || status != 200 || string(body) != want {
			t.Fatalf("post %d = %d, %s, %v; want 200, %s", i, status, body, err, want)
		}
	}
	if _, _, err := c.post("/close", []byte(`{}`)); err != nil || c.nc != nil {
		t.Fatalf("post /close: %v, connection kept: %v", err, c.nc != nil)
	}
	if status, _, err := c.post("/again", []byte(`{}`)); err != nil || status != 200 {
		t.Fatalf("post after a close: %d, %v", status, err)
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2: one kept alive for four requests, one after the server closed it", n)
	}
}

// TestParseCounts reads the committer's counters out of the text that
// leasekeeper's /metrics serves, and nothing else that looks like them.
func TestParseCounts(t *testing.T) {
	body := `# HELP leasekeeper_groups_total Group commits.
# TYPE leasekeeper_groups_total counter
leasekeeper_groups_total 1528
leasekeeper_groups_total_seconds 99
# TYPE leasekeeper_operations_total counter
leasekeeper_operations_total 24296
leasekeeper_round_trips_total 3.093e+03
leasekeeper_round_trips_other{x="1"} 7
# TYPE leasekeeper_commit_duration_seconds histogram
leasekeeper_commit_duration_seconds_bucket{le="0.0001"} 12
leasekeeper_commit_duration_seconds_sum 3.25
leasekeeper_commit_duration_seconds_count 1528
leasekeeper_commit_operations_bucket{le="1"} 4
leasekeeper_commit_operations_sum 24290
leasekeeper_commit_operations_count 1527
`
	got := parseCounts([]byte(body))
	want := engineCounts{roundTrips: 3093, operations: 24296, groups: 1528, commitSeconds: 3.25, histOperations: 24290, histGroups: 1527}
	if got != want {
		t.Errorf("parseCounts = %+v, want %+v", got, want)
	}
	if got := parseCounts([]byte("leasekeeper_up 1\n")); got != (engineCounts{}) {
		t.Errorf("a build without the counters: %+v, want zeros", got)
	}
}
