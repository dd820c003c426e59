// Package testutil holds what the test suites share: opening a real
// database per test, synchronously (Backends, OpenDirect) or behind a real
// HTTP server (StartServer), and loading the golden cases.
package testutil

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// Backend names a way to open a fresh database for a test.
type Backend struct {
	Name string
	Open func(t testing.TB) *engine.Direct
}

// Backends are the databases every contract suite runs on: SQLite in memory,
// a SQLite file in the test's temporary directory, and a fresh schema of the
// PostgreSQL named by LEASEKEEPER_TEST_POSTGRES (internal/pgtest: without
// one, the PostgreSQL runs fail and say how to get one).
var Backends = []Backend{
	{"sqlite-memory", func(t testing.TB) *engine.Direct { return OpenDirect(t, repo.MemoryPath, service.Config{}) }},
	{"sqlite-file", func(t testing.TB) *engine.Direct {
		return OpenDirect(t, filepath.Join(t.TempDir(), "leasekeeper.db"), service.Config{})
	}},
	{"postgres", func(t testing.TB) *engine.Direct { return OpenDirect(t, pgtest.DSN(t), service.Config{}) }},
}

// OpenDirect opens the database at path for synchronous use, with rules,
// closed when the test ends.
func OpenDirect(t testing.TB, path string, rules service.Config) *engine.Direct {
	t.Helper()
	d, err := engine.OpenDirect(context.Background(), path, repo.Options{}, rules)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Server is a real HTTP server on loopback over an engine, for a test.
type Server struct {
	URL    string
	Engine *engine.Engine
	// Stop drains the engine, shuts the HTTP server down and closes the
	// engine; it is idempotent, and runs when the test ends.
	Stop func()
}

// StartServer opens an engine on the database at path and serves it over
// HTTP on loopback until the test ends.
func StartServer(t testing.TB, path string, eo engine.Options, so server.Options) *Server {
	t.Helper()
	eng, err := engine.Open(context.Background(), path, eo)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	hs := httptest.NewServer(server.New(eng, so).Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			eng.Drain()
			hs.Close()
			eng.Close()
		})
	}
	t.Cleanup(stop)
	return &Server{URL: hs.URL, Engine: eng, Stop: stop}
}

// Case is one golden case file: {"note": ..., "ops": [...], "want": [...]}.
type Case struct {
	Name string
	Path string
	Note string
	Ops  []any
	Want []any
}

// RepoRoot finds the module root from a test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// GoldenCases loads every case under testdata/golden, sorted by name.
func GoldenCases(t testing.TB) []Case {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(RepoRoot(t), "testdata", "golden", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no golden cases found in testdata/golden")
	}
	sort.Strings(paths)
	var cases []Case
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		in, err := harness.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if in.Want == nil || len(in.Want) != len(in.Ops) {
			t.Fatalf("%s: want must have one result per operation", p)
		}
		raw, _ := os.ReadFile(p)
		var meta struct {
			Note string `json:"note"`
		}
		json.Unmarshal(raw, &meta)
		if meta.Note == "" {
			t.Fatalf("%s: every golden case needs a one-line note of the rule it pins", p)
		}
		cases = append(cases, Case{Name: strings.TrimSuffix(filepath.Base(p), ".json"), Path: p,
			Note: meta.Note, Ops: in.Ops, Want: in.Want})
	}
	return cases
}

// Eventually polls cond every 20ms until it holds, failing the test with
// what after limit.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HistoryPages reads every page of the history req asks for, limit grants
// a page, at instant ts, and returns their grants in order. It fails t
// when a page holds more than limit grants, or fewer while it names a next
// one, or when the pages never end. Each page and the request that read it
// go to page, where not nil.
func HistoryPages(t testing.TB, svc *engine.Direct, ts int64, req lk.HistoryRequest, limit int,
	page func(req lk.HistoryRequest, res lk.HistoryResult)) []lk.GrantRecord {
	t.Helper()
	ctx := context.Background()
	var all []lk.GrantRecord
	req.Limit = limit
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("history pages never end")
		}
		res, err := engine.Do(svc, ctx, ts, req, service.History)
		if err != nil {
			t.Fatalf("history %+v: %v", req, err)
		}
		if page != nil {
			page(req, res)
		}
		if len(res.Grants) > limit {
			t.Fatalf("a page of limit %d has %d grants", limit, len(res.Grants))
		}
		all = append(all, res.Grants...)
		if res.Next == nil {
			return all
		}
		if len(res.Grants) != limit {
			t.Fatalf("a page with a next has %d grants, limit %d", len(res.Grants), limit)
		}
		req.Before = *res.Next
	}
}
