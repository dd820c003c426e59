package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// variant is one system measured: etcd, or a leasekeeper binary on a backend.
type variant struct {
	backend string // sysEtcd, sysSQLite or sysPostgres
	label   string // its row in the tables
	short   string // its name in the ratios
	bin     string
	old     bool // the --old-leasekeeper binary
}

// variants lists what cfg measures, in the order of the tables.
func variants(cfg config, lk, old string) []variant {
	var vs []variant
	for _, s := range cfg.systems {
		switch s {
		case sysEtcd:
			vs = append(vs, variant{backend: sysEtcd, label: "etcd", short: "etcd"})
		case sysSQLite:
			vs = append(vs, variant{backend: sysSQLite, label: "leasekeeper, one SQLite file", short: "SQLite", bin: lk})
			if old != "" {
				vs = append(vs, variant{backend: sysSQLite, label: "old leasekeeper, one SQLite file", short: "old SQLite", bin: old, old: true})
			}
		case sysPostgres:
			servers := fmt.Sprintf("%d servers on", cfg.servers)
			if cfg.servers == 1 {
				servers = "one server on"
			}
			vs = append(vs, variant{backend: sysPostgres, label: "leasekeeper, " + servers + " one PostgreSQL", short: "PostgreSQL", bin: lk})
			if old != "" {
				vs = append(vs, variant{backend: sysPostgres, label: "old leasekeeper, " + servers + " one PostgreSQL", short: "old PostgreSQL", bin: old, old: true})
			}
		}
	}
	return vs
}

// turn is the order of n systems in round r: a Williams design, the
// sequence 0, 1, n-1, 2, n-2, ... shifted by r, and reversed in the second
// n rounds of every 2n. Over n rounds each system runs once at each place,
// first, last and between, and each pair of systems runs in both orders;
// with n even, each system also follows each other one right after once.
func turn(n, r int) []int {
	base := make([]int, 0, n)
	for lo, hi := 0, n-1; lo <= hi; lo++ {
		base = append(base, lo)
		if lo != 0 && lo != hi {
			base = append(base, hi)
			hi--
		}
	}
	order := make([]int, n)
	for i, b := range base {
		order[i] = (b + r) % n
	}
	if (r/n)%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// env is what one run has started and shares between its cells.
type env struct {
	cfg   config
	tmp   string
	lk    string // the leasekeeper binary
	etcd  string // the etcd binary
	pg    *pgServer
	about []string // the header's lines on what was measured
}

// run measures every row on every system, round after round, then prints
// the tables. Everything it started is stopped before it returns.
func run(ctx context.Context, cfg config, out io.Writer) (err error) {
	log := os.Stderr
	loadStart := loadAverage()
	e, err := setUp(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.tearDown()) }()

	var loads []load
	for _, n := range cfg.clients {
		loads = append(loads, load{clients: n})
	}
	for _, n := range cfg.hot {
		loads = append(loads, load{clients: n, hot: true})
	}
	vs := variants(cfg, e.lk, cfg.old)
	results := make([][][]*cellResult, len(vs)) // [variant][load][round]
	for v := range results {
		results[v] = make([][]*cellResult, len(loads))
	}
	fmt.Fprintf(log, "peers: %d rows × %d systems × %d rounds, %v each after %v of warm-up\n",
		len(loads), len(vs), cfg.rounds, cfg.duration, cfg.warmup)
	for r := range cfg.rounds {
		for li, l := range loads {
			for _, vi := range turn(len(vs), r) {
				v := vs[vi]
				// The same seed for every system: the same random draws.
				res, err := e.cell(ctx, v, l, uint64(r)<<32|uint64(li))
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", r+1, l, v.label, err)
				}
				results[vi][li] = append(results[vi][li], res)
				fmt.Fprintf(log, "peers: round %d/%d, %s, %s: %.0f pairs/s, p50 %s ms, p99 %s ms, %d errors, %d holds checked, load %.2f, CPU busy %s %%, stolen %s %%\n",
					r+1, cfg.rounds, l, v.label, res.rate(), ms(res.percentile(50)), ms(res.percentile(99)), res.errors, res.holds, res.load1,
					percent(res.busy), percent(res.stolen))
				for _, s := range res.samples {
					fmt.Fprintln(log, "peers:   error:", s)
				}
				for _, s := range res.violations {
					fmt.Fprintln(log, "peers:   VIOLATION:", s)
				}
			}
		}
	}
	rep := &report{cfg: cfg, loads: loads, variants: vs, results: results, about: e.about,
		loadStart: loadStart, loadEnd: loadAverage()}
	rep.write(out)
	return rep.verdict()
}

// setUp gets what every cell needs: the temporary folder, the binaries
// (building leasekeeper, installing etcd), the PostgreSQL server. On
// failure it stops what it started.
func setUp(ctx context.Context, cfg config, log io.Writer) (_ *env, err error) {
	e := &env{cfg: cfg}
	if e.tmp, err = os.MkdirTemp(cfg.dir, "peers-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.tearDown())
		}
	}()
	wantLK := slices.Contains(cfg.systems, sysSQLite) || slices.Contains(cfg.systems, sysPostgres)
	throwawayPG := slices.Contains(cfg.systems, sysPostgres) && cfg.postgres == ""
	if ((wantLK && cfg.leasekeeper == "") || throwawayPG) && cfg.repo == "" {
		if e.cfg.repo, err = findRepo("."); err != nil {
			return nil, err
		}
	}
	if wantLK {
		if e.lk = cfg.leasekeeper; e.lk == "" {
			if e.lk, err = buildLeasekeeper(ctx, e.cfg.repo, e.tmp, log); err != nil {
				return nil, err
			}
			e.note("leasekeeper: built from %s (%s)", describeCommit(e.cfg.repo), binaryVersion(e.lk))
		} else {
			e.note("leasekeeper: %s (%s)", e.lk, binaryVersion(e.lk))
		}
		if cfg.old != "" {
			e.note("old leasekeeper: %s (%s)", cfg.old, binaryVersion(cfg.old))
		}
		e.note("leasekeeper clients: one keep-alive HTTP/1.1 connection each; an acquire with \"wait\": %d and \"ttl\": %d, then a release",
			int(cfg.wait/time.Second), cfg.ttl)
	}
	if slices.Contains(cfg.systems, sysSQLite) {
		e.note("SQLite: one `leasekeeper serve` on a new file for each row (WAL, synchronous=FULL: serve's default)")
	}
	if slices.Contains(cfg.systems, sysEtcd) {
		if e.etcd, err = ensureEtcd(ctx, cfg.etcd, log); err != nil {
			return nil, err
		}
		e.note("etcd: %s, one member started for each row on a new data folder, its default settings (the WAL synced before each answer); "+
			"clients: %s concurrency.Mutex, one connection and one session each, Lock then Unlock",
			etcdVersion(e.etcd), moduleVersion("go.etcd.io/etcd/client/v3"))
	}
	if slices.Contains(cfg.systems, sysPostgres) {
		where := "the server given by --postgres"
		if cfg.postgres != "" {
			e.pg = &pgServer{url: cfg.postgres, stop: func() error { return nil }}
		} else {
			where = "a throwaway cluster of .ci/postgres with LEASEKEEPER_PG_DURABLE=1"
			if e.pg, err = startPostgres(ctx, e.cfg.repo, cfg.dir, log); err != nil {
				return nil, err
			}
		}
		d, derr := e.pg.describe(ctx)
		if derr != nil {
			return nil, derr
		}
		cpu := "its processes' CPU time counted with the servers'"
		if _, ok := e.pg.cpu(); !ok {
			cpu = "its processes' CPU time unknown"
		}
		e.note("PostgreSQL: %s (%s, %s); %d `leasekeeper serve` sharing a new schema for each row, client n on server n mod %d",
			d, where, cpu, cfg.servers, cfg.servers)
	}
	return e, nil
}

func (e *env) note(format string, args ...any) {
	e.about = append(e.about, fmt.Sprintf(format, args...))
}

// tearDown stops the PostgreSQL server if this run started it, and removes
// the temporary folder.
func (e *env) tearDown() error {
	var err error
	if e.pg != nil {
		err = e.pg.stop()
	}
	return errors.Join(err, os.RemoveAll(e.tmp))
}

// cell starts v on an empty store, drives it with l, stops it and removes
// what it stored.
func (e *env) cell(ctx context.Context, v variant, l load, seed uint64) (_ *cellResult, err error) {
	dir, err := os.MkdirTemp(e.tmp, "cell-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var inst instance
	switch v.backend {
	case sysEtcd:
		inst, err = startEtcd(ctx, e.etcd, dir, e.spec())
	case sysSQLite:
		inst, err = startLeasekeeper(ctx, v.bin, dir, filepath.Join(dir, "leasekeeper.db"), 1, e.spec(), nil)
	case sysPostgres:
		dsn, drop, serr := e.pg.freshSchema(ctx)
		if serr != nil {
			return nil, serr
		}
		var fleet *lkFleet
		if fleet, err = startLeasekeeper(ctx, v.bin, dir, dsn, e.cfg.servers, e.spec(), drop); err == nil {
			fleet.database = e.pg.cpu
			inst = fleet
		}
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := inst.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	return runCell(ctx, inst, l, e.cfg.warmup, e.cfg.duration, seed)
}

func (e *env) spec() pairSpec {
	return pairSpec{wait: e.cfg.wait, hold: e.cfg.hold, ttl: e.cfg.ttl}
}

// buildLeasekeeper builds cmd/leasekeeper of the repository into dir.
func buildLeasekeeper(ctx context.Context, repo, dir string, log io.Writer) (string, error) {
	bin := filepath.Join(dir, "leasekeeper")
	fmt.Fprintf(log, "peers: building cmd/leasekeeper of %s\n", repo)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/leasekeeper")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/leasekeeper: %w\n%s", err, out)
	}
	return bin, nil
}

// describeCommit names the repository's commit, "+dirty" when its tree
// has changes.
func describeCommit(repo string) string {
	out, err := exec.Command("git", "-C", repo, "describe", "--always", "--dirty=+dirty", "--abbrev=10").Output()
	if err != nil {
		return "the repository (no git to name its commit)"
	}
	return "commit " + strings.TrimSpace(string(out))
}

func binaryVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "version unknown: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// moduleVersion is the version of a module this program was built with.
func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return path + " " + d.Version
			}
		}
	}
	return path
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, or
// -1s where it cannot be read (Linux only).
func loadAverage() [3]float64 {
	avg := [3]float64{-1, -1, -1}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return avg
	}
	fields := strings.Fields(string(b))
	for i := range min(3, len(fields)) {
		if x, err := strconv.ParseFloat(fields[i], 64); err == nil {
			avg[i] = x
		}
	}
	return avg
}

func cpus() string {
	return fmt.Sprintf("%d CPUs, GOMAXPROCS %d", runtime.NumCPU(), runtime.GOMAXPROCS(0))
}
