package main

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{900, 100, 500, 300, 700}, 500},
	} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// TestTurn: over n rounds each system takes each place once, and runs
// both before and after each other one.
func TestTurn(t *testing.T) {
	for n := 1; n <= 6; n++ {
		places := make([]map[int]bool, n)
		before := map[[2]int]bool{}
		for i := range places {
			places[i] = map[int]bool{}
		}
		for r := range n {
			order := turn(n, r)
			every := make([]int, n)
			for i := range every {
				every[i] = i
			}
			if !slices.Equal(slices.Sorted(slices.Values(order)), every) {
				t.Fatalf("%d systems, round %d: order %v is not every system once", n, r, order)
			}
			for place, v := range order {
				places[v][place] = true
				for _, w := range order[place+1:] {
					before[[2]int{v, w}] = true
				}
			}
		}
		for v, p := range places {
			if len(p) != n {
				t.Errorf("%d systems: system %d ran only at places %v in %d rounds", n, v, p, n)
			}
			for w := range n {
				if w != v && (!before[[2]int{v, w}] || !before[[2]int{w, v}]) {
					t.Errorf("%d systems: %d and %d did not run in both orders", n, v, w)
				}
			}
		}
	}
}

func TestNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p := nearestRank(lat, 50); p != 50*time.Millisecond {
		t.Errorf("p50 = %v", p)
	}
	if p := nearestRank(lat, 99); p != 99*time.Millisecond {
		t.Errorf("p99 = %v", p)
	}
	if p := nearestRank(nil, 50); p != -1 {
		t.Errorf("p50 of nothing = %v, want -1", p)
	}
}

func TestThousands(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 916.4: "916", 2349: "2,349", 1234567: "1,234,567", -4378: "-4,378"} {
		if got := thousands(x); got != want {
			t.Errorf("thousands(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestLoadNames(t *testing.T) {
	if n := (load{clients: 16}).names(); len(n) != 64 || n[0] != "n0" || n[63] != "n63" {
		t.Errorf("16 clients, light: %d names %v...", len(n), n[:2])
	}
	if n := (load{clients: 64, hot: true}).names(); !slices.Equal(n, []string{"hot"}) {
		t.Errorf("hot lock: names %v", n)
	}
	for l, want := range map[load]string{{clients: 1}: "1 client", {clients: 16}: "16 clients", {clients: 64, hot: true}: "hot lock, 64"} {
		if got := l.String(); got != want {
			t.Errorf("%#v is %q, want %q", l, got, want)
		}
	}
}

// TestPerPairAndOperation: the servers' CPU over the measured pairs, the
// committer's seconds over its operations, in µs; unknown as -1, and left
// out of a median rather than counted as a figure.
func TestPerPairAndOperation(t *testing.T) {
	c := &cellResult{pairs: 5000, serverCPU: 900 * time.Millisecond,
		counts: &engineCounts{operations: 10000, groups: 500, commitSeconds: 0.7}}
	if got := c.cpuPerPair(); got != 180 {
		t.Errorf("cpuPerPair = %v, want 180", got)
	}
	if got := c.committerPerOp(); got != 70 {
		t.Errorf("committerPerOp = %v, want 70", got)
	}
	old := &cellResult{pairs: 4000, serverCPU: -1, counts: &engineCounts{}}
	if old.cpuPerPair() != -1 || old.committerPerOp() != -1 {
		t.Errorf("unknown: %v, %v; want -1, -1", old.cpuPerPair(), old.committerPerOp())
	}
	// The build before issue 19: no counters, but its histogram of
	// operations per commit, and no round trip counted.
	before := &cellResult{pairs: 5000, counts: &engineCounts{commitSeconds: 0.9, histOperations: 10000, histGroups: 400}}
	if got, per, trips := before.committerPerOp(), before.opsPerGroup(), before.roundTripsPerOp(); got != 90 || per != 25 || trips != -1 {
		t.Errorf("the build before: %v µs, %v per group, %v round trips; want 90, 25, -1", got, per, trips)
	}
	if none := (&cellResult{counts: &engineCounts{operations: 10}}).committerPerOp(); none != -1 {
		t.Errorf("no commit seconds: %v, want -1", none)
	}
	r := &report{results: [][][]*cellResult{{{c, old, &cellResult{pairs: 1000, serverCPU: 300 * time.Millisecond}}}}}
	if got := r.medianKnown(0, 0, (*cellResult).cpuPerPair); got != 240 { // of 180 and 300
		t.Errorf("medianKnown = %v, want 240", got)
	}
	if got := r.medianKnown(0, 0, (*cellResult).committerPerOp); got != 70 {
		t.Errorf("medianKnown of one = %v, want 70", got)
	}
	if got := micros(-1); got != "-" {
		t.Errorf("micros(-1) = %q", got)
	}
}

// cpuCounting is a system whose every pair costs its server 100 µs of CPU:
// what runCell reports must be the measured part's, warm-up left out.
type cpuCounting struct{ used atomic.Int64 }

func (s *cpuCounting) worker(int) (worker, error) { return cpuWorker{s}, nil }
func (s *cpuCounting) stop() error                { return nil }
func (s *cpuCounting) serverCPU() (time.Duration, bool) {
	return time.Duration(s.used.Load()), true
}

type cpuWorker struct{ s *cpuCounting }

func (w cpuWorker) pair(context.Context, string) (pairTimes, error) {
	start := time.Now()
	time.Sleep(time.Millisecond)
	w.s.used.Add(int64(100 * time.Microsecond))
	end := time.Now()
	return pairTimes{start: start, acquired: start, releasing: end, end: end, token: end.UnixNano()}, nil
}
func (cpuWorker) close() {}

func TestRunCellServerCPU(t *testing.T) {
	s := &cpuCounting{}
	res, err := runCell(context.Background(), s, load{clients: 1}, 30*time.Millisecond, 30*time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.pairs == 0 || res.cpuPerPair() != 100 {
		t.Errorf("%d pairs, %v µs of the server's CPU each; want 100: the measured part's alone", res.pairs, res.cpuPerPair())
	}
}
