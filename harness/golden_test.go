package harness_test

import (
	"context"
	"testing"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestGolden replays every case of testdata/golden through Run on each
// backend and compares the results with the case's hand-derived want.
func TestGolden(t *testing.T) {
	cases := testutil.GoldenCases(t)
	for _, b := range testutil.Backends {
		t.Run(b.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					if b.Name != "sqlite-memory" {
						t.Parallel()
					}
					got, err := harness.Run(context.Background(), b.Open(t), c.Ops)
					if err != nil {
						t.Fatalf("run: %v", err)
					}
					if d := harness.Diff(c.Ops, c.Want, got); d != "" {
						t.Errorf("%s\n(%s)\n%s", c.Path, c.Note, d)
					}
				})
			}
		})
	}
}
