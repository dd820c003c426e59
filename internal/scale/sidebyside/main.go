// Command sidebyside measures what a change costs, side by side with the
// binary from before it: `leasekeeper run` on every scale scenario
// (testdata/scale), and the server under lkload, old and new strictly
// alternating, on a machine whose load changes from one second to the next.
// docs/performance.md ("Cost of the grant history") shows what it printed.
//
//	go run ./internal/scale/sidebyside                       # against 5991c13^, the build before history
//	go run ./internal/scale/sidebyside --old v0.2.0 --pairs 7 --scenarios '^[46]'
//	go run ./internal/scale/sidebyside --lkload 'sqlite:16:4,postgres:16:4' --db "$URL"
//
// The old binary is built from `git archive REV` of the repository in the
// current directory (or given with --old-bin), the new one from the working
// tree. For each scenario it runs --pairs pairs, the order within a pair
// alternating (old first, then new first), and prints the medians of the
// wall and CPU times (user + system: the other tenants of the machine
// disturb it less), the ratios, the scale budget (0.2 s + 50 µs per
// operation, setup included) and whether both binaries printed the same
// results. Scenario 6 runs the same workload over 100 and over 10,000 locks
// of history; the last table sets those against each other, for the whole
// file and, through `leasekeeper bench --process=false`, for the workload
// alone (its setup not timed).
//
// --lkload lists server loads, each backend:clients:renews: lkload (built
// from the working tree) starts the old and the new `serve` in turn, each
// for --duration, and every pair does one acquire, renews renews and one
// release.
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/scale"
)

type config struct {
	old, oldBin, newBin string
	pairs               int
	scenarios           *regexp.Regexp
	engine              bool
	lkload              []load
	db                  string
	duration            time.Duration
}

// load is one lkload configuration.
type load struct {
	backend         string // sqlite or postgres
	clients, renews int
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var scen, loads string
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	fs.StringVar(&cfg.old, "old", "5991c13^", "git revision to build the old binary from")
	fs.StringVar(&cfg.oldBin, "old-bin", "", "the old leasekeeper binary, instead of building --old")
	fs.StringVar(&cfg.newBin, "new-bin", "", "the new leasekeeper binary (default: built from the working tree)")
	fs.IntVar(&cfg.pairs, "pairs", 5, "old/new pairs per scenario and per load")
	fs.StringVar(&scen, "scenarios", ".", "regular expression: the scenario files to run")
	fs.BoolVar(&cfg.engine, "engine", true, "also time scenario 6's workload in process (leasekeeper bench --process=false)")
	fs.StringVar(&loads, "lkload", "sqlite:16:4,sqlite:64:0", "comma-separated lkload runs, each backend:clients:renews; empty for none")
	fs.StringVar(&cfg.db, "db", "", "postgres:// URL for the postgres loads (lkload creates and drops a schema per run)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each lkload run measures")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.pairs < 1 {
		return cfg, errors.New("--pairs must be at least 1")
	}
	var err error
	if cfg.scenarios, err = regexp.Compile(scen); err != nil {
		return cfg, fmt.Errorf("--scenarios: %w", err)
	}
	for _, l := range strings.Split(loads, ",") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		f := strings.Split(l, ":")
		var ld load
		var e1, e2 error
		if len(f) == 3 {
			ld.backend = f[0]
			ld.clients, e1 = strconv.Atoi(f[1])
			ld.renews, e2 = strconv.Atoi(f[2])
		}
		if len(f) != 3 || e1 != nil || e2 != nil || ld.clients < 1 || ld.renews < 0 ||
			(ld.backend != "sqlite" && ld.backend != "postgres") {
			return cfg, fmt.Errorf("--lkload: %q is not backend:clients:renews (sqlite or postgres)", l)
		}
		if ld.backend == "postgres" && cfg.db == "" {
			return cfg, fmt.Errorf("--lkload %s needs --db", l)
		}
		cfg.lkload = append(cfg.lkload, ld)
	}
	return cfg, nil
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	tmp, err := os.MkdirTemp("", "sidebyside-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	oldBin, newBin := cfg.oldBin, cfg.newBin
	if oldBin == "" {
		if oldBin, err = buildRev(ctx, cfg.old, tmp); err != nil {
			return err
		}
	}
	if newBin == "" {
		newBin = filepath.Join(tmp, "leasekeeper-new")
		if err := goBuild(ctx, ".", newBin, "./cmd/leasekeeper"); err != nil {
			return err
		}
	}
	lkload := filepath.Join(tmp, "lkload")
	if len(cfg.lkload) > 0 {
		if err := goBuild(ctx, ".", lkload, "./cmd/lkload"); err != nil {
			return err
		}
	}
	bins := [2]string{oldBin, newBin}
	from := ""
	if cfg.oldBin == "" {
		from = " (built from " + cfg.old + ")"
	}
	fmt.Fprintf(out, "old: %s%s\nnew: %s\n%d pairs, old and new alternating; %s\n\n", oldBin, from, newBin, cfg.pairs, loadAverage())

	files, err := filepath.Glob(filepath.Join("testdata", "scale", "*.json"))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "| scenario | ops | budget s | old s | new s | new/old | pair ratios | old CPU s | new CPU s | CPU new/old | new within budget | same results |")
	fmt.Fprintln(out, "|---|--:|--:|--:|--:|--:|---|--:|--:|--:|---|---|")
	walls := map[string][2]float64{}
	var over []string
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		if !cfg.scenarios.MatchString(name) {
			continue
		}
		ops, err := countOps(file)
		if err != nil {
			return err
		}
		var wall, cpu [2][]float64
		var ratios []float64
		var sums [2][32]byte
		same := true
		for p := range cfg.pairs {
			var w [2]float64
			for k := range 2 {
				i := (p + k) % 2 // old first in even pairs, new first in odd ones
				wt, ct, sum, err := timeRun(ctx, bins[i], file)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", name, bins[i], err)
				}
				if p > 0 && sum != sums[i] {
					same = false // a binary that disagrees with itself
				}
				sums[i] = sum
				w[i] = wt
				wall[i], cpu[i] = append(wall[i], wt), append(cpu[i], ct)
			}
			ratios = append(ratios, w[1]/w[0])
		}
		same = same && sums[0] == sums[1]
		budget := 0.2 + 50e-6*float64(ops)
		mo, mn := median(wall[0]), median(wall[1])
		walls[name] = [2]float64{mo, mn}
		// The wall time is what the budget bounds; on a shared machine the
		// CPU time says whether the process itself would have fitted.
		within := "yes"
		switch {
		case mn > budget && median(cpu[1]) <= budget:
			within = "CPU only"
		case mn > budget:
			within = "**no**"
		}
		fmt.Fprintf(out, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %s | %s |\n", name, ops, budget,
			mo, mn, mn/mo, list(ratios), median(cpu[0]), median(cpu[1]), median(cpu[1])/median(cpu[0]), within, yes(same))
		if mn > budget {
			over = append(over, fmt.Sprintf("%s: the new binary's median wall time %.2f s is over the budget %.2f s (the old one's: %.2f s)",
				name, mn, budget, mo))
		}
	}
	for _, o := range over {
		fmt.Fprintf(out, "\n**%s**\n", o)
	}
	fmt.Fprintf(out, "\n%s\n", loadAverage())

	if a, b := walls["6-history-100-locks"], walls["6-history-10000-locks"]; a[0] > 0 && b[0] > 0 {
		fmt.Fprintln(out, "\n100 times more idle locks (scenario 6, 10,000 locks against 100): time ratio, target under 1.2")
		fmt.Fprintln(out, "\n| binary | whole file | workload alone (in process) |")
		fmt.Fprintln(out, "|---|--:|--:|")
		eng := [2]string{"-", "-"}
		if cfg.engine {
			var e [2][2][]float64 // binary, scenario (100, 10000) → ms per run
			for p := range cfg.pairs {
				for k := range 2 {
					i := (p + k) % 2
					ms, err := benchScenario6(ctx, bins[i])
					if err != nil {
						return fmt.Errorf("bench %s: %w", bins[i], err)
					}
					e[i][0], e[i][1] = append(e[i][0], ms[0]), append(e[i][1], ms[1])
				}
			}
			for i := range 2 {
				eng[i] = fmt.Sprintf("%.2f (%.0f / %.0f ms)", median(e[i][1])/median(e[i][0]), median(e[i][1]), median(e[i][0]))
			}
		}
		for i, n := range []string{"old", "new"} {
			fmt.Fprintf(out, "| %s | %.2f (%.2f / %.2f s) | %s |\n", n, b[i]/a[i], b[i], a[i], eng[i])
		}
		fmt.Fprintf(out, "\n%s\n", loadAverage())
	}

	for _, ld := range cfg.lkload {
		fmt.Fprintf(out, "\nlkload, %s, %d clients, %d renews per acquire+release, %v per run\n\n", ld.backend, ld.clients, ld.renews, cfg.duration)
		fmt.Fprintln(out, "| binary | median pairs/s | runs | median p50 ms | median p99 ms | errors |")
		fmt.Fprintln(out, "|---|--:|---|--:|--:|--:|")
		var rate, p50, p99 [2][]float64
		var errs [2]int
		for p := range cfg.pairs {
			for k := range 2 {
				i := (p + k) % 2
				r, err := runLoad(ctx, lkload, bins[i], ld, cfg)
				if err != nil {
					return fmt.Errorf("lkload %s: %w", bins[i], err)
				}
				rate[i], p50[i], p99[i] = append(rate[i], r[0]), append(p50[i], r[1]), append(p99[i], r[2])
				errs[i] += int(r[3])
			}
		}
		for i, n := range []string{"old", "new"} {
			fmt.Fprintf(out, "| %s | %.0f | %s | %.2f | %.2f | %d |\n", n, median(rate[i]), listInt(rate[i]), median(p50[i]), median(p99[i]), errs[i])
		}
		fmt.Fprintf(out, "\nnew/old pairs/s: %.2f; %s\n", median(rate[1])/median(rate[0]), loadAverage())
	}
	return nil
}

// buildRev builds cmd/leasekeeper as of git revision rev into dir.
func buildRev(ctx context.Context, rev, dir string) (string, error) {
	src := filepath.Join(dir, "old-src")
	cmd := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev)
	cmd.Stderr = os.Stderr
	tarball, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git archive %s: %w", rev, err)
	}
	if err := untar(bytes.NewReader(tarball), src); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "leasekeeper-old")
	return bin, goBuild(ctx, src, bin, "./cmd/leasekeeper")
}

func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(path, b, os.FileMode(h.Mode)&0o755|0o600)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w", pkg, dir, err)
	}
	return nil
}

// countOps counts a scenario file's operations as the budget does, each
// repeat's runs included.
func countOps(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	in, err := harness.Decode(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	return scale.Count(in.Ops), nil
}

// timeRun runs `bin run file` and returns its wall time, its CPU time (user
// and system) in seconds, and a digest of the results it printed.
func timeRun(ctx context.Context, bin, file string) (wall, cpu float64, sum [32]byte, err error) {
	cmd := exec.CommandContext(ctx, bin, "run", file)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	start := time.Now()
	if err = cmd.Run(); err != nil {
		return
	}
	wall = time.Since(start).Seconds()
	cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	return wall, cpu, sha256.Sum256(stdout.Bytes()), nil
}

// benchScenario6 runs scenario 6's two variants once in process and returns
// the workload's milliseconds over 100 and over 10,000 locks.
func benchScenario6(ctx context.Context, bin string) ([2]float64, error) {
	var ms [2]float64
	cmd := exec.CommandContext(ctx, bin, "bench", "--process=false", "--runs", "1", "--scenario", "6-history")
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return ms, err
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		// | scenario | size | ops | process s | budget s | sqlite ms | ...
		f := strings.Split(line, "|")
		if len(f) < 8 {
			continue
		}
		i := -1
		switch strings.TrimSpace(f[1]) {
		case "6-history-100-locks":
			i = 0
		case "6-history-10000-locks":
			i = 1
		}
		if i < 0 {
			continue
		}
		if ms[i], err = strconv.ParseFloat(strings.TrimSpace(f[6]), 64); err != nil {
			return ms, fmt.Errorf("bench line %q: %w", line, err)
		}
		found++
	}
	if found != 2 {
		return ms, fmt.Errorf("bench printed no scenario 6 rows:\n%s", b)
	}
	return ms, nil
}

// runLoad runs lkload once against bin and returns pairs/s, p50 and p99 in
// ms, and the errors.
func runLoad(ctx context.Context, lkload, bin string, ld load, cfg config) ([4]float64, error) {
	var r [4]float64
	args := []string{"--leasekeeper", bin, "--clients", strconv.Itoa(ld.clients), "--renews", strconv.Itoa(ld.renews),
		"--duration", cfg.duration.String()}
	if ld.backend == "postgres" {
		args = append(args, "--db", cfg.db)
	}
	cmd := exec.CommandContext(ctx, lkload, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("%w\n%s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// | backend | servers | clients | pairs/s | p50 ms | p99 ms | errors |
		f := strings.Split(sc.Text(), "|")
		if len(f) != 9 || strings.TrimSpace(f[1]) != ld.backend {
			continue
		}
		for k, col := range []int{4, 5, 6, 7} {
			if r[k], err = strconv.ParseFloat(strings.TrimSpace(f[col]), 64); err != nil {
				return r, fmt.Errorf("lkload line %q: %w", sc.Text(), err)
			}
		}
		return r, nil
	}
	return r, fmt.Errorf("lkload printed no result:\n%s\n%s", b, stderr.Bytes())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func list(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.2f", x)
	}
	return b.String()
}

func listInt(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.0f", x)
	}
	return b.String()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

// loadAverage reads the machine's load average where the system shows it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ") + " at " + time.Now().UTC().Format("15:04:05") + " UTC"
}
