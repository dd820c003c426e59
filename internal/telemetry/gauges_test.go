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
	"github.com/leasekeeper/leasekeeper/service"
)

// TestGaugesApartFromCommitter: a scrape reads the gauges while the
// committer waits behind another writer of the file, and leaves out a lease
// past its expiry that the lapse timer could not retire yet. (Before, the
// gauges went through the committer: the scrape waited for its 10 s lock
// timeout and reported -1.)
func TestGaugesApartFromCommitter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tel.db")
	var eng *engine.Engine
	var err error
	tel := telemetry.New(nil, func(ctx context.Context) (service.Gauges, error) { return eng.Gauges(ctx) }, telemetry.Options{})
	clock := engine.NewManualClock(time.Unix(1000, 0))
	eng, err = engine.Open(ctx, path, engine.Options{Clock: clock, Observer: tel})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Observer: tel, Metrics: tel.Handler()})
	hs := httptest.NewServer(srv.Handler())
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	for _, b := range []string{
		`{"client":"a","lock":"L1","ttl":10}`,
		`{"client":"a","lock":"L2","ttl":1000}`,
		`{"client":"b","lock":"L2","ttl":10}`,
	} {
		resp, err := http.Post(hs.URL+"/v1/acquire", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	// Another writer holds the file's write lock: the committer, and the
	// lapse timer's retirement of a's lease on L1 (ended at 1010), wait.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer func() { conn.ExecContext(ctx, "ROLLBACK"); conn.Close() }()
	clock.Set(time.Unix(1015, 0))

	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"\nleasekeeper_locks_held 1\n", "\nleasekeeper_waiters 1\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
}
