package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseCPU(t *testing.T) {
	got := parseCPU("cpu  3817607 286011 1035403 5899472 112150 0 156591 487860 17 4")
	want := cpuTicks{total: 3817607 + 286011 + 1035403 + 5899472 + 112150 + 156591 + 487860, idle: 5899472 + 112150, steal: 487860, ok: true}
	if got != want {
		t.Errorf("parseCPU = %+v, want %+v", got, want)
	}
	for _, line := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7", "cpu 1 2 x 4 5 6 7 8"} {
		if got := parseCPU(line); got.ok {
			t.Errorf("parseCPU(%q) = %+v, want unknown", line, got)
		}
	}
}

func TestShares(t *testing.T) {
	a := cpuTicks{total: 1000, idle: 400, steal: 10, ok: true}
	b := cpuTicks{total: 1200, idle: 450, steal: 30, ok: true}
	busy, stolen := shares(a, b)
	if busy != 0.65 || stolen != 0.1 { // 200 ticks: 50 idle, 20 stolen
		t.Errorf("shares = %v, %v, want 0.65, 0.1", busy, stolen)
	}
	if busy, stolen := shares(cpuTicks{}, b); busy != -1 || stolen != -1 {
		t.Errorf("shares from unknown = %v, %v, want -1, -1", busy, stolen)
	}
	if busy, stolen := shares(b, b); busy != -1 || stolen != -1 {
		t.Errorf("shares of no time = %v, %v, want -1, -1", busy, stolen)
	}
	if got := percent(0.1234); got != "12.3" {
		t.Errorf("percent(0.1234) = %q", got)
	}
}

// TestRoundByRound: the report gives each new / old ratio round by round,
// from the cells of the same round, and the CPU shares of the cells.
func TestRoundByRound(t *testing.T) {
	cell := func(pairs int, stolen float64) *cellResult {
		return &cellResult{pairs: pairs, elapsed: time.Second, lat: []time.Duration{time.Millisecond}, busy: 0.9, stolen: stolen}
	}
	r := &report{
		cfg:   config{rounds: 4, duration: time.Second},
		loads: []load{{clients: 64}},
		variants: []variant{
			{backend: sysSQLite, label: "leasekeeper, one SQLite file", short: "SQLite"},
			{backend: sysSQLite, label: "old leasekeeper, one SQLite file", short: "old SQLite", old: true},
		},
		results: [][][]*cellResult{
			{{cell(300, 0.01), cell(100, 0.01), cell(220, 0.02), cell(400, 0.05)}},
			{{cell(100, 0.01), cell(100, 0.20), cell(200, 0.03), cell(100, 0.01)}},
		},
	}
	var b strings.Builder
	r.write(&b)
	out := b.String()
	// Rounds 3.00, 1.00, 1.10 and 4.00: median 2.05, where the medians
	// give 2.60. Calm: rounds 1 and 3 (round 2's old run had 20 % stolen,
	// round 4's new run 5 %, which is not calm).
	for _, want := range []string{
		"| ratio, SQLite, new / old | 2.60x |",
		"| SQLite | 2.05x (1.00 to 4.00) |",
		"| SQLite | 2.05x (2) |",
		"busy 90.0 % of the time (median of the cells; 90.0 to 90.0) and stolen by the hypervisor 1.5 % (median; at most 20.0 %)",
		"| 1 | 64 clients | leasekeeper, one SQLite file | 300 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestParseProcessCPU: utime and stime are the 14th and 15th fields,
// counted after the command's name, which may hold spaces and ")".
func TestParseProcessCPU(t *testing.T) {
	// A real line of a leasekeeper serve, its name made awkward.
	line := "4242 (lk (x) serve) S 1 4242 4242 0 -1 4194560 21790 0 0 0 1234 567 8 9 20 0 9 0 11802331 1473220608 10301 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0\n"
	got, ok := parseProcessCPU(line)
	if want := (1234 + 567) * 10 * time.Millisecond; !ok || got != want {
		t.Errorf("parseProcessCPU = %v, %v; want %v, true", got, ok, want)
	}
	for _, bad := range []string{"", "4242 serve S 1 2 3", "4242 (serve) S 1 2 3 4 5 6 7 8 9 10", "4242 (serve) S 1 4242 4242 0 -1 4194560 21790 0 0 0 x 567 8 9"} {
		if got, ok := parseProcessCPU(bad); ok {
			t.Errorf("parseProcessCPU(%q) = %v, want unknown", bad, got)
		}
	}
}

// TestProcessCPU reads a real process's CPU time: a busy process uses
// some, and more as it runs; once it has exited it is unknown.
func TestProcessCPU(t *testing.T) {
	p := startSpinner(t, "busy", "exec env PEERS_TEST_SPIN=wall:10s \"$0\"")
	first := waitCPU(t, p.cpu, func(d time.Duration) bool { return d >= 3*clockTick })
	waitCPU(t, p.cpu, func(d time.Duration) bool { return d > first })
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if got, ok := p.cpu(); ok {
		t.Errorf("after it exited: %v, true; want unknown", got)
	}
}

// startSpinner starts /bin/sh -c script with this test binary as $0 (see
// TestMain), and kills its whole process group at the end of the test.
func startSpinner(t *testing.T, name, script string) *process {
	t.Helper()
	p, err := startProcess(name, t.TempDir()+"/"+name+".log", "/bin/sh", "-c", script, os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// waitCPU polls read until ok accepts its figure, for at most 20 s.
func waitCPU(t *testing.T, read func() (time.Duration, bool), ok func(time.Duration) bool) time.Duration {
	t.Helper()
	var last time.Duration
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		d, known := read()
		if !known {
			t.Fatalf("CPU time unknown (last %v)", last)
		}
		if last = d; ok(d) {
			return d
		}
	}
	t.Fatalf("CPU time still %v after 20 s", last)
	return 0
}

func TestParseProcStat(t *testing.T) {
	line := "4243 (postgres: x (y)) S 4200 4243 4243 0 -1 4194560 21790 0 0 0 120 30 45 5 20 0 1 0 11802331 1473220608 10301\n"
	got, ok := parseProcStat(line)
	want := procStat{ppid: 4200, self: 150 * clockTick, children: 50 * clockTick}
	if !ok || got != want {
		t.Errorf("parseProcStat = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := parseProcStat("4243 (postgres) S 4200 4243 4243 0 -1 4194560 21790 0 0 0 120 30 45"); ok {
		t.Error("a line without cstime parsed")
	}
}

// TestTreeCPU: a parent that only waits is charged its busy children's
// time, that of the one it has waited for and that of the one still
// running.
func TestTreeCPU(t *testing.T) {
	p := startSpinner(t, "tree", `PEERS_TEST_SPIN=cpu:200ms "$0"; PEERS_TEST_SPIN=wall:10s "$0" & wait`)
	pid := p.cmd.Process.Pid
	parent := func() (time.Duration, bool) { s, ok := readProcStat(pid); return s.children, ok }
	waitCPU(t, parent, func(d time.Duration) bool { return d >= 150*time.Millisecond }) // the first child ended (in ticks: some 200 ms)
	tree := func() (time.Duration, bool) {
		own, ok := readProcStat(pid)
		if !ok {
			return 0, false
		}
		all, ok := treeCPU(pid)
		return all - own.self - own.children, ok
	}
	waitCPU(t, tree, func(d time.Duration) bool { return d > 0 }) // the second's, running
	if own, _ := readProcStat(pid); own.self > 100*time.Millisecond {
		t.Errorf("the waiting parent used %v itself", own.self)
	}
}

// TestPostmaster finds a cluster's postmaster by its postmaster.pid, only
// if that process runs on the same data folder, through a symbolic link
// too.
func TestPostmaster(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(data, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	p := startSpinner(t, "postmaster", `exec env PEERS_TEST_SPIN=wall:10s "$0" -D `+filepath.Join(dir, "link"))
	pid := p.cmd.Process.Pid
	if got := postmaster(data); got != 0 {
		t.Errorf("without postmaster.pid: %d, want 0", got)
	}
	os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(strconv.Itoa(pid)+"\n"+data+"\n"), 0o600)
	deadline := time.Now().Add(20 * time.Second)
	for postmaster(data) != pid && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // until exec has given it its arguments
	}
	if got := postmaster(data); got != pid {
		t.Errorf("postmaster = %d, want %d", got, pid)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "postmaster.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)
	if got := postmaster(other); got != 0 {
		t.Errorf("a pid file naming a process on another folder: %d, want 0", got)
	}
}

// TestMain lets the tests run this binary as a busy process:
// PEERS_TEST_SPIN=wall:D spins for D, cpu:D until it has used D of CPU
// (20 s at most either way), then exits.
func TestMain(m *testing.M) {
	if spin := os.Getenv("PEERS_TEST_SPIN"); spin != "" {
		kind, d, _ := strings.Cut(spin, ":")
		limit, err := time.ParseDuration(d)
		if err != nil {
			os.Exit(2)
		}
		for start := time.Now(); time.Since(start) < 20*time.Second; {
			if kind == "wall" && time.Since(start) >= limit {
				break
			}
			var ru syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			if kind == "cpu" && time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= limit {
				break
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
