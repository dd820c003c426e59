package harness_test

import (
	"context"
	"encoding/json"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
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

// statusSpy is an engine that records whether status was asked for a rank.
type statusSpy struct {
	harness.Engine
	asked []bool
}

func (s *statusSpy) Status(ctx context.Context, ts int64, q lk.StatusRequest) (lk.StatusResult, error) {
	s.asked = append(s.asked, !q.WithoutPosition)
	return s.Engine.Status(ctx, ts, q)
}

// TestReplayStatusSkipsRank: the contract's status has no rank, and the
// replay does not ask for it, so that the statuses of every waiter of a long
// queue cost what they touch, not the queue ahead of each (section 6).
func TestReplayStatusSkipsRank(t *testing.T) {
	spy := &statusSpy{Engine: testutil.OpenDirect(t, repo.MemoryPath, service.Config{})}
	ops := []any{
		[]any{"acquire", json.Number("0"), "h", "Q", json.Number("10")},
		[]any{"acquire", json.Number("0"), "w", "Q", json.Number("10")},
		[]any{"status", json.Number("1"), "w"},
	}
	if _, err := harness.Run(context.Background(), spy, ops); err != nil {
		t.Fatal(err)
	}
	if len(spy.asked) != 1 || spy.asked[0] {
		t.Errorf("status asked for a rank: %v", spy.asked)
	}
}
