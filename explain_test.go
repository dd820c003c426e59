package leasekeeper

import "testing"

// TestWorstEnding: a lapse is worse than a revoke, a revoke than an abort,
// an abort than a release; no predecessor, no ending.
func TestWorstEnding(t *testing.T) {
	p := func(es ...Ending) []Predecessor {
		var out []Predecessor
		for _, e := range es {
			out = append(out, Predecessor{Ended: e})
		}
		return out
	}
	for _, c := range []struct {
		in   []Predecessor
		want Ending
	}{
		{nil, ""},
		{p(EndReleased), EndReleased},
		{p(EndReleased, EndAborted), EndAborted},
		{p(EndRevoked, EndAborted, EndReleased), EndRevoked},
		{p(EndReleased, EndLapsed, EndRevoked), EndLapsed},
	} {
		if got := WorstEnding(c.in); got != c.want {
			t.Errorf("WorstEnding(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}
