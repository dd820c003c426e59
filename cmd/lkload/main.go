// Command lkload measures leasekeeper's acquire+release round trips over
// loopback HTTP: pairs per second and the p50/p99 latency of one
// acquire+release pair, at several numbers of concurrent clients.
//
//	go run ./cmd/lkload --clients 1,16,64 --duration 5s
//	go run ./cmd/lkload --server http://127.0.0.1:7070
//
// By default each client speaks minimal HTTP/1.1 on its own keep-alive
// connection (raw.go): lkload shares the machine with the server, and Go's
// full HTTP client would take as much CPU as the server it measures.
// --http net uses net/http instead, for comparison.
//
// Client n uses its own lock, so nobody waits for anybody: each loops
// acquire(lock "bench-{n}", client "c{n}", ttl 30) → release until the
// duration is up, and what is measured is the server's cost per operation,
// durability included. --renews N renews the lease N times between the
// acquire and its release (a renew-heavy load; a pair is then N+2
// requests, and pairs/s and the latencies count whole pairs).
//
// Without --server, lkload starts `leasekeeper serve` itself on a new
// SQLite file (WAL, synchronous=FULL: serve's default) in a temporary folder
// under --dir, and stops it at the end, with the harness of the robustness
// tests (internal/e2e/cluster): a server is ready when its --ready-file
// is written and GET /v1/ready answers 200, so the binary must have both
// (a binary from before them: start it yourself and give --server). The
// servers' standard error is passed on when they have stopped. The binary
// is --leasekeeper, else "leasekeeper" next to lkload's own executable,
// else the one on PATH, else built with `go build` from the module in the
// current directory.
//
// With --db postgres://..., the servers run on PostgreSQL instead, in a new
// schema lkload_<random> that lkload creates in that database and drops at
// the end, so that every run starts empty and leaves nothing behind.
// --servers N starts N servers sharing that schema, and client n talks to
// server n mod N:
//
//	go run ./cmd/lkload --db "$URL" --servers 2 --clients 64
//
// lkload reads the server's answers in either shape, told apart per answer:
// the JSON objects of the current API ({"outcome": "granted", "token": 7,
// ...}), and the positional tuples of the servers from before it
// (["granted", 7, 1767225630], "released"), so that it can measure those
// too (--server, or --leasekeeper with a binary that has --ready-file).
//
// The results are a markdown table on stdout, one row per number of clients,
// with the backend and the number of servers; progress goes to stderr.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/pgschema"
	"github.com/leasekeeper/leasekeeper/repo"
)

type config struct {
	server      string
	leasekeeper string
	dir         string
	db          string // a postgres:// URL, or "" for a SQLite file under dir
	servers     int
	clients     []int
	duration    time.Duration
	warmup      time.Duration
	ttl         int
	renews      int // renews between each acquire and its release
	prefix      string
	timeout     time.Duration
	http        string // "raw" or "net"
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "lkload:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lkload:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var clients string
	fs := flag.NewFlagSet("lkload", flag.ContinueOnError)
	fs.StringVar(&cfg.server, "server", "", "base `URL` of a running server, e.g. http://127.0.0.1:7070 (default: start leasekeeper serve on a temporary file)")
	fs.StringVar(&cfg.leasekeeper, "leasekeeper", "", "the leasekeeper binary to start when --server is not given")
	fs.StringVar(&cfg.dir, "dir", "", "folder for the temporary database when lkload starts the server (default: the system's temporary folder)")
	fs.StringVar(&cfg.db, "db", "", "postgres:// `URL` of a database in which lkload may create a schema: the servers it starts run on a new schema there, dropped at the end (default: a SQLite file under --dir)")
	fs.IntVar(&cfg.servers, "servers", 1, "how many servers to start on the --db database; clients are spread over them round-robin")
	fs.StringVar(&clients, "clients", "1,16,64", "comma-separated numbers of concurrent clients, one table row each")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each row is measured")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured run before each row (opens the connections)")
	fs.IntVar(&cfg.ttl, "ttl", 30, "lease ttl in seconds")
	fs.IntVar(&cfg.renews, "renews", 0, "renews of the lease between each acquire and its release (a renew-heavy load: each pair is then 2+N requests)")
	fs.StringVar(&cfg.prefix, "prefix", "", "prefix for lock and client names (to keep runs apart on a shared server)")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "timeout of one HTTP request")
	fs.StringVar(&cfg.http, "http", "raw", "client side: raw (a minimal HTTP/1.1 client, light on the shared CPU) or net (Go's net/http)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, f := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("--clients: %q is not a positive number", f)
		}
		cfg.clients = append(cfg.clients, n)
	}
	if cfg.duration <= 0 || cfg.warmup < 0 || cfg.timeout <= 0 {
		return cfg, errors.New("--duration and --timeout must be positive, --warmup not negative")
	}
	if cfg.http != "raw" && cfg.http != "net" {
		return cfg, errors.New("--http must be raw or net")
	}
	if cfg.renews < 0 {
		return cfg, errors.New("--renews must not be negative")
	}
	if cfg.ttl < 1 || cfg.ttl > 86400 {
		return cfg, errors.New("--ttl must be from 1 to 86400")
	}
	if cfg.db != "" && !repo.IsPostgres(cfg.db) {
		return cfg, fmt.Errorf("--db takes a postgres:// URL, not %q (without --db the server runs on a temporary SQLite file)", cfg.db)
	}
	if cfg.servers < 1 {
		return cfg, errors.New("--servers must be at least 1")
	}
	// Servers share only a PostgreSQL database: on one SQLite file each
	// would trust state in its memory that another had changed.
	if cfg.servers > 1 && cfg.db == "" {
		return cfg, errors.New("--servers above 1 needs --db: several servers can share only a PostgreSQL database")
	}
	if cfg.server != "" && (cfg.db != "" || cfg.servers != 1) {
		return cfg, errors.New("--db and --servers are for the servers lkload starts; they do not go with --server")
	}
	cfg.server = strings.TrimRight(cfg.server, "/")
	return cfg, nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	bases, backend := []string{cfg.server}, "external"
	if cfg.server == "" {
		f, err := startFleet(ctx, cfg)
		if err != nil {
			return err
		}
		defer f.stop()
		bases, backend = f.bases(), "sqlite"
		if cfg.db != "" {
			backend = "postgres"
		}
	}
	most := slices.Max(cfg.clients)
	hc := &http.Client{
		Transport: &http.Transport{
			MaxIdleConns:        2 * max(64, most),
			MaxIdleConnsPerHost: max(64, most),
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		Timeout: cfg.timeout,
	}
	defer hc.CloseIdleConnections()
	b := &bench{cfg: cfg, bases: bases, hc: hc}
	for _, base := range bases {
		if err := b.health(ctx, base); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "lkload: %s, %v per row after %v of warm-up, GOMAXPROCS %d, %s HTTP client, %d renews per pair\n",
		strings.Join(bases, " "), cfg.duration, cfg.warmup, runtime.GOMAXPROCS(0), cfg.http, cfg.renews)
	fmt.Fprintln(out, "| backend | servers | clients | pairs/s | p50 ms | p99 ms | errors |")
	fmt.Fprintln(out, "|---|--:|--:|--:|--:|--:|--:|")
	empty := false
	for _, n := range cfg.clients {
		b.clear(ctx, n)
		if cfg.warmup > 0 {
			b.level(ctx, n, cfg.warmup)
		}
		fmt.Fprintf(os.Stderr, "lkload: %d clients for %v\n", n, cfg.duration)
		r := b.level(ctx, n, cfg.duration)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(out, "| %s | %d | %d | %.0f | %s | %s | %d |\n", backend, len(bases), n,
			r.rate(), ms(r.percentile(50)), ms(r.percentile(99)), r.errors)
		if len(r.lat) == 0 {
			empty = true
		}
		for _, e := range r.samples {
			fmt.Fprintln(os.Stderr, "lkload: error:", e)
		}
	}
	if empty {
		return errors.New("a row completed no acquire+release pair")
	}
	return nil
}

// result is one row's measurements.
type result struct {
	lat     []time.Duration // one per completed pair
	errors  int
	samples []string // the first few errors
	elapsed time.Duration
}

func (r *result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.lat)) / r.elapsed.Seconds()
}

// percentile is the nearest-rank percentile of the latencies (lat sorted).
func (r *result) percentile(p float64) time.Duration {
	if len(r.lat) == 0 {
		return -1
	}
	i := int(float64(len(r.lat))*p/100+0.999999) - 1
	return r.lat[min(max(i, 0), len(r.lat)-1)]
}

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64)
}

type bench struct {
	cfg   config
	bases []string // client i talks to bases[i % len(bases)]
	hc    *http.Client
}

func (b *bench) names(i int) (lock, client string) {
	return fmt.Sprintf("%sbench-%d", b.cfg.prefix, i), fmt.Sprintf("%sc%d", b.cfg.prefix, i)
}

func (b *bench) base(i int) string { return b.bases[i%len(b.bases)] }

func (b *bench) health(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/health", nil)
	if err != nil {
		return err
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return fmt.Errorf("server %s: %w", base, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("server %s: health answered %s", base, resp.Status)
	}
	return nil
}

// clear releases what the clients of a row may still hold from an earlier,
// interrupted run, so that their first acquire is not refused as busy.
func (b *bench) clear(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for i := range n {
		lock, client := b.names(i)
		wg.Go(func() { b.post(ctx, b.base(i), "/v1/release", map[string]any{"client": client, "lock": lock}) })
	}
	wg.Wait()
}

// level runs n clients for d and measures every acquire+release pair.
func (b *bench) level(ctx context.Context, n int, d time.Duration) *result {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range n {
		lock, client := b.names(i)
		base := b.base(i)
		pair := func() error { return b.pair(ctx, base, client, lock) }
		if b.cfg.http == "raw" {
			rc, err := newRawClient(base, lock, client, b.cfg.ttl, b.cfg.renews, b.cfg.timeout)
			if err != nil {
				res.errors++
				res.samples = append(res.samples, err.Error())
				continue
			}
			defer rc.close()
			pair = rc.pair
		}
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			var errs int
			var samples []string
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				if err := pair(); err != nil {
					if ctx.Err() != nil {
						break
					}
					errs++
					if len(samples) < 3 {
						samples = append(samples, err.Error())
					}
					// Leave the lock free for the next try, whatever happened.
					b.post(ctx, base, "/v1/release", map[string]any{"client": client, "lock": lock})
					time.Sleep(5 * time.Millisecond)
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.lat = append(res.lat, lat...)
			res.errors += errs
			res.samples = append(res.samples, samples...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	slices.Sort(res.lat)
	if len(res.samples) > 5 {
		res.samples = res.samples[:5]
	}
	return res
}

// pair runs one acquire, --renews renews and the release; the answers may
// come in either shape (answers.go).
func (b *bench) pair(ctx context.Context, base, client, lock string) error {
	status, body, err := b.post(ctx, base, "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": b.cfg.ttl})
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if !isGranted(status, body, false) {
		return fmt.Errorf("acquire %s by %s: %d %s", lock, client, status, bytes.TrimSpace(body))
	}
	for range b.cfg.renews {
		status, body, err = b.post(ctx, base, "/v1/renew", map[string]any{"client": client, "lock": lock, "ttl": b.cfg.ttl})
		if err != nil {
			return fmt.Errorf("renew: %w", err)
		}
		if !isRenewed(status, body) {
			return fmt.Errorf("renew %s by %s: %d %s", lock, client, status, bytes.TrimSpace(body))
		}
	}
	status, body, err = b.post(ctx, base, "/v1/release", map[string]any{"client": client, "lock": lock})
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if !isReleased(status, body) {
		return fmt.Errorf("release %s by %s: %d %s", lock, client, status, bytes.TrimSpace(body))
	}
	return nil
}

func (b *bench) post(ctx context.Context, base, path string, fields map[string]any) (int, []byte, error) {
	js, err := json.Marshal(fields)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(js))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// fleet is the servers lkload started and what they run on: a temporary
// folder (binary, SQLite file, audit log, the servers' standard error) and,
// on PostgreSQL, a schema. The servers are a cluster.Cluster: the harness of
// the robustness tests (docs/robustness.md), so that both start, watch and
// stop serve the same way.
type fleet struct {
	tmp     string
	cluster *cluster.Cluster
	drop    func() error // drops the PostgreSQL schema; nil on SQLite
}

// startFleet starts cfg.servers `leasekeeper serve` on one new, empty
// database, on free loopback ports.
func startFleet(ctx context.Context, cfg config) (_ *fleet, err error) {
	tmp, err := os.MkdirTemp(cfg.dir, "lkload-")
	if err != nil {
		return nil, err
	}
	f := &fleet{tmp: tmp}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	bin, err := findLeasekeeper(ctx, cfg.leasekeeper, tmp)
	if err != nil {
		return nil, err
	}
	db, where := filepath.Join(tmp, "lkload.db"), "database in "+tmp
	if cfg.db != "" {
		db, f.drop, err = pgschema.Fresh(ctx, cfg.db, "lkload_")
		if err != nil {
			return nil, fmt.Errorf("--db: %w", err)
		}
		where = "database " + pgschema.Redact(db)
	}
	// The cluster starts the servers one after the other: the first applies
	// the migrations, and the others then find the schema ready instead of
	// queueing on goose's lock. The audit log goes to a file, as in a
	// deployment, one for all servers (each appends whole lines).
	f.cluster, err = cluster.StartCluster(ctx, cluster.Options{
		Servers:  cfg.servers,
		Postgres: cfg.db != "",
		DB:       db,
		Binary:   bin,
		Dir:      tmp,
		Args:     []string{"--audit-log", filepath.Join(tmp, "audit.log")},
	})
	if err != nil {
		return nil, err
	}
	for _, s := range f.cluster.Servers {
		fmt.Fprintf(os.Stderr, "lkload: started %s serve on %s (%s)\n", bin, s.URL(), where)
	}
	return f, nil
}

func (f *fleet) bases() []string {
	var out []string
	for _, s := range f.cluster.Servers {
		out = append(out, s.URL())
	}
	return out
}

// stop stops the servers, together, since each may take a while to drain;
// passes on what they wrote to standard error, each line prefixed with the
// server's name; then drops the schema, which waits for no server's lock
// once they are gone; then removes the folder.
func (f *fleet) stop() {
	if f.cluster != nil {
		f.cluster.Close()
		for i, s := range f.cluster.Servers {
			name := "serve"
			if len(f.cluster.Servers) > 1 {
				name = fmt.Sprintf("serve %d", i+1)
			}
			for _, path := range s.Logs() {
				passOn(name, path)
			}
		}
	}
	if f.drop != nil {
		if err := f.drop(); err != nil {
			fmt.Fprintln(os.Stderr, "lkload:", err)
		}
	}
	os.RemoveAll(f.tmp)
}

// passOn copies a server's log to standard error, name before each line,
// but its address, which lkload says itself.
func passOn(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lkload:", err)
		return
	}
	for line := range strings.Lines(string(b)) {
		// serve's listening line, JSON (its default) or text.
		if !strings.Contains(line, `"msg":"listening"`) && !strings.Contains(line, " msg=listening ") {
			fmt.Fprintf(os.Stderr, "%s: %s\n", name, strings.TrimSuffix(line, "\n"))
		}
	}
}

// findLeasekeeper returns the binary to run: flag, else next to this
// executable, else on PATH, else built from the module in the current
// directory into tmp.
func findLeasekeeper(ctx context.Context, flagged, tmp string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	name := "leasekeeper"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join(tmp, name)
	fmt.Fprintln(os.Stderr, "lkload: no leasekeeper binary given or found; building one from the module in the current directory")
	build := exec.CommandContext(ctx, "go", "build", "-o", p, "github.com/leasekeeper/leasekeeper/cmd/leasekeeper")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("no leasekeeper binary (give --leasekeeper or --server), and building one failed: %v\n%s", err, out)
	}
	return p, nil
}
