package telemetry_test

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// scrape returns the lines of GET url/metrics that are not comments.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			lines[line] = true
		}
	}
	return lines
}

// wantLines fails the test for each of want that the scrape lacks.
func wantLines(t *testing.T, got map[string]bool, when string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !got[w] {
			t.Errorf("%s: /metrics lacks %q", when, w)
		}
	}
}

// TestReadinessGauges: leasekeeper_ready and leasekeeper_not_ready{reason}
// follow the verdicts of GET /v1/ready, every reason shown from the start:
// ready at start, not ready for a failed commit, ready again, not ready
// while stopping.
func TestReadinessGauges(t *testing.T) {
	tel := telemetry.New(nil, nil, telemetry.Options{})
	srv := testutil.StartServer(t, filepath.Join(t.TempDir(), "ready.db"), engine.Options{Observer: tel},
		server.Options{Observer: tel, Metrics: tel.Handler()})
	hs := srv
	notReady := func(reason string) []string {
		var lines []string
		for _, r := range engine.NotReadyReasons {
			v := "0"
			if r == reason {
				v = "1"
			}
			lines = append(lines, `leasekeeper_not_ready{reason="`+r+`"} `+v)
		}
		return lines
	}
	probe := func(want int) {
		t.Helper()
		resp, err := http.Get(hs.URL + "/v1/ready")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET /v1/ready: HTTP %d, want %d", resp.StatusCode, want)
		}
	}
	wantLines(t, scrape(t, hs.URL), "at start", append(notReady(""), "leasekeeper_ready 1")...)
	probe(http.StatusOK)
	wantLines(t, scrape(t, hs.URL), "ready", append(notReady(""), "leasekeeper_ready 1")...)

	// A verdict the server gives for a full disk, then ready again.
	tel.Ready(engine.NotReadyDiskFull)
	wantLines(t, scrape(t, hs.URL), "disk full", append(notReady(engine.NotReadyDiskFull), "leasekeeper_ready 0")...)
	probe(http.StatusOK)
	wantLines(t, scrape(t, hs.URL), "ready again", append(notReady(""), "leasekeeper_ready 1")...)

	srv.Engine.Drain()
	probe(http.StatusServiceUnavailable)
	wantLines(t, scrape(t, hs.URL), "stopping", append(notReady(engine.NotReadyShuttingDown), "leasekeeper_ready 0")...)
}

// TestReadinessGaugeCommitTimeout: a probe whose commit does not come in
// time (another writer holds the file's write lock) sets the reason
// commit_timeout.
func TestReadinessGaugeCommitTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready.db")
	tel := telemetry.New(nil, nil, telemetry.Options{})
	srv := testutil.StartServer(t, path, engine.Options{Observer: tel}, server.Options{Observer: tel, Metrics: tel.Handler()})
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	resp, err := http.Get(srv.URL + "/v1/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/ready behind another writer: HTTP %d, want 503", resp.StatusCode)
	}
	wantLines(t, scrape(t, srv.URL), "behind another writer", "leasekeeper_ready 0", `leasekeeper_not_ready{reason="commit_timeout"} 1`)
}

// TestOldestWaitAndConnectionGauges: leasekeeper_oldest_wait_seconds is
// the wait of the client queued earliest, counted to the server's clock at
// the scrape; the connection gauges read the guard and its cap.
func TestOldestWaitAndConnectionGauges(t *testing.T) {
	var eng *engine.Engine
	tel := telemetry.New(nil, func(ctx context.Context) (service.Gauges, error) { return eng.Gauges(ctx) }, telemetry.Options{})
	clock := engine.NewManualClock(time.Unix(1000, 0))
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "wait.db"), engine.Options{Clock: clock, Observer: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Observer: tel, Metrics: tel.Handler()})
	conns := server.NewConns(server.ConnOptions{Max: 50})
	tel.ConnectionsFrom(conns.Open, conns.Max())
	hs := httptest.NewUnstartedServer(srv.Handler())
	conns.Configure(hs.Config)
	hs.Start()
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(hs.URL+"/v1/acquire", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	wantLines(t, scrape(t, hs.URL), "nobody waiting", "leasekeeper_oldest_wait_seconds 0", "leasekeeper_connections_max 50")
	post(`{"client":"a","lock":"L","ttl":1000}`)
	post(`{"client":"b","lock":"L","ttl":10}`) // queued at 1000
	clock.Set(time.Unix(1042, 0))
	post(`{"client":"c","lock":"L","ttl":10}`) // queued at 1042
	got := scrape(t, hs.URL)
	wantLines(t, got, "b waiting since 1000, at 1042", "leasekeeper_oldest_wait_seconds 42")
	// The scrape's own connection at least; the test's client keeps its
	// earlier ones alive.
	open := false
	for line := range got {
		if v, ok := strings.CutPrefix(line, "leasekeeper_connections_open "); ok && v != "0" {
			open = true
		}
	}
	if !open {
		t.Error("leasekeeper_connections_open is missing or 0 during a scrape")
	}
}
