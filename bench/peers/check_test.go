package main

import (
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	h := func(name string, client, from, to int, token int64) hold {
		return hold{name: name, client: client, from: at(from), to: at(to), token: token}
	}
	for _, tc := range []struct {
		name  string
		holds []hold
		want  []string // a piece of each violation, in order
	}{
		{"none", nil, nil},
		{"one after the other, tokens rising", []hold{
			h("a", 1, 0, 10, 1), h("a", 2, 10, 20, 2), h("a", 1, 25, 30, 5),
		}, nil},
		{"names apart may overlap", []hold{
			h("a", 1, 0, 10, 1), h("b", 2, 5, 15, 1),
		}, nil},
		{"given in any order", []hold{
			h("a", 2, 10, 20, 2), h("b", 3, 0, 50, 9), h("a", 1, 0, 10, 1),
		}, nil},
		{"two holders at once", []hold{
			h("a", 1, 0, 10, 1), h("a", 2, 5, 15, 2),
		}, []string{`"a" held by client 1 (token 1) and by client 2 (token 2) at once, for 5ms`}},
		{"an overlap with a hold before the one before", []hold{
			h("a", 1, 0, 100, 1), h("a", 2, 10, 20, 2), h("a", 3, 30, 40, 3),
		}, []string{"client 1 (token 1) and by client 2", "client 1 (token 1) and by client 3"}},
		{"a token reissued", []hold{
			h("a", 1, 0, 10, 4), h("a", 2, 10, 20, 4),
		}, []string{`"a": token 4 granted to client 2 after token 4 to client 1`}},
		{"a token going backwards", []hold{
			h("a", 1, 0, 10, 4), h("a", 2, 11, 20, 3),
		}, []string{"token 3 granted to client 2 after token 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tc.holds)
			if len(got) != len(tc.want) {
				t.Fatalf("check = %q, want %d violations", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCheckBoundsItsReport(t *testing.T) {
	t0 := time.Now()
	var holds []hold
	for i := range 30 {
		holds = append(holds, hold{name: "a", client: i, from: t0, to: t0.Add(time.Second), token: int64(i + 1)})
	}
	got := check(holds)
	if len(got) != maxReported+1 || got[maxReported] != "and 19 more" {
		t.Fatalf("check = %q, want %d violations and \"and 19 more\"", got, maxReported)
	}
}
