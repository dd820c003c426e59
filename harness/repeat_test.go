package harness

import (
	"math"
	"testing"
)

func TestLastRunFits(t *testing.T) {
	for _, c := range []struct {
		ts, count, step int64
		want            bool
	}{
		{-1, 4, 2, true},
		{math.MinInt64, 100000, math.MaxInt64 / 100000, true},
		{math.MaxInt64, 1, math.MaxInt64, true},
		{math.MaxInt64, 2, 0, true},
		{math.MaxInt64, 2, 1, false},
		{math.MaxInt64 - 10, 11, 1, true},
		{math.MaxInt64 - 10, 12, 1, false},
		{0, 100000, math.MaxInt64, false},
		{math.MinInt64, 3, math.MaxInt64, false}, // 2*MaxInt64 overflows before ts is added
		{math.MinInt64, 2, math.MaxInt64, true},
	} {
		if got := lastRunFits(c.ts, c.count, c.step); got != c.want {
			t.Errorf("lastRunFits(%d, %d, %d) = %v, want %v", c.ts, c.count, c.step, got, c.want)
		}
	}
}

func TestPlaceholders(t *testing.T) {
	for _, c := range []struct {
		in   string
		i    int64
		want string
		ok   bool
	}{
		{"job{i}", 7, "job7", true},
		{"L{i%100}", 250, "L50", true},
		{"L{i+3}", 4, "L7", true},
		{"L{i+3%4}", 4, "L3", true},
		{"{i+007%010}-{i}", 5, "2-5", true},
		{"{j}{i-1}{ i}{I}{i+}{i%}{i+1%}", 3, "{j}{i-1}{ i}{I}{i+}{i%}{i+1%}", true},
		{"{{i}}", 2, "{2}", true},
		{"{i+9223372036854775807}", 99999, "9223372036854875806", true},
		{"x{i%0}", 0, "", false},
		{"{i+2%00}", 0, "", false},
		{"{i+9223372036854775808}", 0, "", false},
		{"{i%99999999999999999999}", 0, "", false},
		{"{i", 1, "{i", true},
	} {
		p, ok := compile(c.in)
		if ok != c.ok {
			t.Errorf("compile(%q) ok = %v, want %v", c.in, ok, c.ok)
			continue
		}
		if !ok {
			continue
		}
		got := c.in
		if p != nil {
			got = p.expand(c.i)
		}
		if got != c.want {
			t.Errorf("%q at i=%d = %q, want %q", c.in, c.i, got, c.want)
		}
	}
}
