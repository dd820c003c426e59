package main

import (
	"slices"
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
