package main

import (
	"os"
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

// TestProcessCPU reads a real process's CPU time: a shell in a busy loop
// uses some, and more as it runs; once it has exited it is unknown.
func TestProcessCPU(t *testing.T) {
	p, err := startProcess("busy loop", t.TempDir()+"/busy.log", "/bin/sh", "-c", "while :; do :; done")
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	time.Sleep(300 * time.Millisecond)
	first, ok := p.cpu()
	if !ok || first <= 0 {
		t.Fatalf("after 300 ms of a busy loop: %v, %v; want some CPU time", first, ok)
	}
	time.Sleep(300 * time.Millisecond)
	if second, ok := p.cpu(); !ok || second <= first {
		t.Errorf("300 ms later: %v, %v; want more than %v", second, ok, first)
	}
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	if got, ok := p.cpu(); ok {
		t.Errorf("after it exited: %v, true; want unknown", got)
	}
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
// time, those it has waited for and those still running; and findProcess
// finds it by its arguments.
func TestTreeCPU(t *testing.T) {
	marker := "peers-tree-" + strconv.Itoa(os.Getpid())
	p, err := startProcess("tree", t.TempDir()+"/tree.log", "/bin/sh", "-c",
		`timeout 0.3 sh -c 'while :; do :; done'; sh -c 'while :; do :; done' & wait`, marker)
	if err != nil {
		t.Fatal(err)
	}
	// The busy child outlives a parent stopped alone: the whole group goes.
	defer func() {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}()
	if pid := findProcess("-c", `timeout 0.3 sh -c 'while :; do :; done'; sh -c 'while :; do :; done' & wait`, marker); pid != p.cmd.Process.Pid {
		t.Fatalf("findProcess = %d, want %d", pid, p.cmd.Process.Pid)
	}
	if pid := findProcess(marker, "-D"); pid != 0 {
		t.Errorf("findProcess of arguments in another order = %d, want 0", pid)
	}
	time.Sleep(500 * time.Millisecond) // the first child has ended, the second runs
	own, _ := readProcStat(p.cmd.Process.Pid)
	first, ok := treeCPU(p.cmd.Process.Pid)
	if !ok || own.children < 100*time.Millisecond || first <= own.self+own.children {
		t.Fatalf("after 500 ms: the tree %v (%v), the parent %+v; want the ended child's time in the parent's, and the running one's on top", first, ok, own)
	}
	time.Sleep(300 * time.Millisecond)
	if second, ok := treeCPU(p.cmd.Process.Pid); !ok || second <= first {
		t.Errorf("300 ms later: %v, %v; want more than %v", second, ok, first)
	}
}
