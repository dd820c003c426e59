package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	lkserver "github.com/leasekeeper/leasekeeper/internal/server"
)

var row = regexp.MustCompile(`(?m)^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| [\d.]+ \| [\d.]+ \| (\d+) \|$`)

// checkRows checks that out is a table of want rows, each with the given
// backend and number of servers, completed pairs and no errors.
func checkRows(t *testing.T, name, out, backend string, servers, want int) {
	t.Helper()
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) != want {
		t.Fatalf("%s: want %d table rows, got:\n%s", name, want, out)
	}
	for _, r := range rows {
		if r[1] != backend || r[2] != strconv.Itoa(servers) {
			t.Errorf("%s: row says backend %s, %s servers; want %s, %d", name, r[1], r[2], backend, servers)
		}
		pairs, _ := strconv.Atoi(r[4])
		if pairs == 0 || r[5] != "0" {
			t.Errorf("%s: %s clients: %s pairs/s, %s errors", name, r[3], r[4], r[5])
		}
	}
}

// TestLoadAgainstServer runs both client sides briefly against a real server
// on loopback and checks that the table reports completed pairs and no errors.
func TestLoadAgainstServer(t *testing.T) {
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "load.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := lkserver.New(eng, lkserver.Options{})
	// lkload's clients are its own (the raw one is no net/http client):
	// its answers are checked against the OpenAPI document as the server
	// gives them.
	hs := httptest.NewServer(validated(t, srv.Handler()))
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	for _, mode := range []string{"raw", "net"} {
		cfg, err := parseFlags([]string{"--server", hs.URL, "--clients", "1,4", "--duration", "300ms",
			"--warmup", "0s", "--http", mode})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), cfg, &out); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		checkRows(t, mode, out.String(), "external", 1, 2)
	}
}

// TestLoadWithRenews: with --renews N, every pair renews its lease N times
// between the acquire and the release, with either client side.
func TestLoadWithRenews(t *testing.T) {
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "load.db"), engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := lkserver.New(eng, lkserver.Options{})
	var acquires, renews, releases atomic.Int64
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/acquire":
			acquires.Add(1)
		case "/v1/renew":
			renews.Add(1)
		case "/v1/release":
			releases.Add(1)
		}
		srv.Handler().ServeHTTP(w, r)
	})
	hs := httptest.NewServer(validated(t, counted))
	defer func() { eng.Drain(); hs.Close(); eng.Close() }()
	for _, mode := range []string{"raw", "net"} {
		acquires.Store(0)
		renews.Store(0)
		releases.Store(0)
		cfg, err := parseFlags([]string{"--server", hs.URL, "--clients", "2", "--duration", "300ms",
			"--warmup", "0s", "--http", mode, "--renews", "3"})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), cfg, &out); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		checkRows(t, mode, out.String(), "external", 1, 1)
		// The clear before the row releases once per client, and a pair cut
		// by the end of the row may have renewed without releasing.
		a, n, r := acquires.Load(), renews.Load(), releases.Load()-2
		if a == 0 || n < 3*r || n > 3*a {
			t.Errorf("%s: %d acquires, %d renews, %d releases of pairs: want 3 renews per pair", mode, a, n, r)
		}
	}
}

// validated checks every answer of h against the API's OpenAPI document,
// failing t on a mismatch.
func validated(t *testing.T, h http.Handler) http.Handler {
	v := apitest.New(t)
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if err := v.Check(r, rec.status, w.Header(), rec.body.Bytes()); err != nil && !done.Load() {
			t.Errorf("%s %s: status %d, body %s\n%v", r.Method, r.URL.Path, rec.status, bytes.TrimSpace(rec.body.Bytes()), err)
		}
	})
}

// recorder passes an answer on and keeps a copy of its status and body.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func TestFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--db", "lk.db"},  // not PostgreSQL
		{"--servers", "2"}, // several servers on one SQLite file
		{"--servers", "0"},
		{"--renews", "-1"},
		{"--server", "http://127.0.0.1:7070", "--db", "postgres://h/db"},
		{"--server", "http://127.0.0.1:7070", "--servers", "2"},
	} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}

// TestTwoServersOnPostgres starts two real servers on a fresh schema, spreads
// clients over them, and checks that the schema is gone afterwards.
func TestTwoServersOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	bin := filepath.Join(t.TempDir(), "leasekeeper")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/leasekeeper/leasekeeper/cmd/leasekeeper").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	schemas := func() []string {
		t.Helper()
		rows, _ := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'lkload\_%'`)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		return names
	}
	before := schemas()
	cfg, err := parseFlags([]string{"--db", dsn, "--servers", "2", "--leasekeeper", bin, "--dir", t.TempDir(),
		"--clients", "1,4", "--duration", "300ms", "--warmup", "0s"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	checkRows(t, "postgres", out.String(), "postgres", 2, 2)
	// By count, not by name: lkload does not tell its schema's name, and
	// nothing else in the tests makes lkload_ schemas.
	if after := schemas(); len(after) > len(before) {
		t.Errorf("lkload left a schema behind: before %s, after %s", strings.Join(before, " "), strings.Join(after, " "))
	}
}
