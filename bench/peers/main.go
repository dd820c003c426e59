package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	repo        string // the leasekeeper repository: .ci/postgres, and the default build
	leasekeeper string // "" builds one from repo
	old         string // a second binary, "" for none
	etcd        string // "" finds etcd on PATH, installing Debian's etcd-server if missing
	postgres    string // a running server's URL; "" starts a throwaway one
	systems     []string
	clients     []int // light-contention rows
	hot         []int // hot-lock rows
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	servers     int // leasekeeper servers on PostgreSQL
	ttl         int
	wait        time.Duration // how long one acquire may block
	hold        time.Duration // between a grant and its release
	dir         string
}

// The backends that --systems names.
const (
	sysEtcd     = "etcd"
	sysSQLite   = "sqlite"
	sysPostgres = "postgres"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = run(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, usage io.Writer) (config, error) {
	var cfg config
	var systems, clients, hot string
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&cfg.leasekeeper, "leasekeeper", "", "the leasekeeper `binary` to measure (default: build cmd/leasekeeper of the repository this runs in)")
	fs.StringVar(&cfg.old, "old-leasekeeper", "", "a second leasekeeper `binary`, measured in the same rounds, e.g. the build before a change (its rows and the new/old ratios are added)")
	fs.StringVar(&cfg.etcd, "etcd", "", "the etcd `binary` (default: etcd on PATH, installed from Debian's etcd-server package when missing)")
	fs.StringVar(&cfg.postgres, "postgres", "", "postgres:// `URL` of a running server to use (default: a throwaway durable one from the repository's .ci/postgres); each row gets a fresh schema, dropped after it")
	fs.StringVar(&systems, "systems", "etcd,sqlite,postgres", "which to measure, comma-separated: etcd, sqlite (one server on a SQLite file), postgres (--servers servers on one PostgreSQL)")
	fs.StringVar(&clients, "clients", "1,16,64", "light-contention rows: numbers of clients, comma-separated; each row has 4 names per client, each pair takes one at random")
	fs.StringVar(&hot, "hot", "64", "hot-lock rows: numbers of clients that all take one name, comma-separated (\"\" for none)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each row is measured")
	fs.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured load before each row, on the same connections")
	fs.IntVar(&cfg.rounds, "rounds", 1, "rounds of every row on every system, interleaved; the tables give the median of the rounds")
	fs.IntVar(&cfg.servers, "servers", 2, "leasekeeper servers sharing the PostgreSQL database; client n talks to server n mod N")
	fs.IntVar(&cfg.ttl, "ttl", 30, "leasekeeper lease ttl in seconds (etcd's sessions keep their default of 60 s)")
	fs.DurationVar(&cfg.wait, "wait", time.Minute, "how long one blocking acquire may wait before it counts as an error")
	fs.DurationVar(&cfg.hold, "hold", 0, "how long each client holds a name before releasing it: 0, the measurement, gives the safety check only instants to compare; a few ms makes it stricter")
	fs.StringVar(&cfg.dir, "dir", "", "folder for the temporary files: databases, etcd's data, the servers' logs (default: the system's temporary folder)")
	fs.StringVar(&cfg.repo, "repo", "", "the leasekeeper repository (default: found from the current folder upwards)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if cfg.clients, err = counts("--clients", clients); err != nil {
		return cfg, err
	}
	if cfg.hot, err = counts("--hot", hot); err != nil {
		return cfg, err
	}
	if len(cfg.clients)+len(cfg.hot) == 0 {
		return cfg, errors.New("--clients and --hot are both empty: no row to measure")
	}
	for _, s := range strings.Split(systems, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s != sysEtcd && s != sysSQLite && s != sysPostgres:
			return cfg, fmt.Errorf("--systems: %q is none of etcd, sqlite, postgres", s)
		case slices.Contains(cfg.systems, s):
			return cfg, fmt.Errorf("--systems: %s twice", s)
		}
		cfg.systems = append(cfg.systems, s)
	}
	switch {
	case cfg.duration <= 0 || cfg.warmup < 0:
		return cfg, errors.New("--duration must be positive and --warmup not negative")
	case cfg.rounds < 1:
		return cfg, errors.New("--rounds must be at least 1")
	case cfg.servers < 1:
		return cfg, errors.New("--servers must be at least 1")
	case cfg.ttl < 1 || cfg.ttl > 86400:
		return cfg, errors.New("--ttl must be from 1 to 86400 seconds")
	case cfg.hold < 0 || cfg.hold >= time.Duration(cfg.ttl)*time.Second/2:
		// A hold near the ttl would let leases lapse, and the check would rightly flag it.
		return cfg, errors.New("--hold must be from 0 to half of --ttl")
	case cfg.wait < time.Second || cfg.wait > time.Hour:
		// leasekeeper's wait is whole seconds, from 0 to 3,600.
		return cfg, errors.New("--wait must be from 1s to 1h")
	}
	if cfg.postgres != "" && !strings.HasPrefix(cfg.postgres, "postgres://") && !strings.HasPrefix(cfg.postgres, "postgresql://") {
		return cfg, fmt.Errorf("--postgres takes a postgres:// URL, not %q", cfg.postgres)
	}
	return cfg, nil
}

// counts reads a comma-separated list of client counts.
func counts(flagName, list string) ([]int, error) {
	var out []int
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive number", flagName, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// findRepo looks from dir upwards for the leasekeeper repository: the
// folder with .ci/postgres and the go.mod of the main module.
func findRepo(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(mod), "module github.com/leasekeeper/leasekeeper\n") {
			if _, err := os.Stat(filepath.Join(dir, ".ci", "postgres")); err == nil {
				return dir, nil
			}
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("not inside the leasekeeper repository: give --repo, or --leasekeeper and --postgres")
		}
		dir = up
	}
}
