package harness_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// reopening is an Engine that closes and reopens its database file after
// every operation, so that nothing the service keeps in memory (the clock,
// the registration counter, the earliest expiry) can stand in for what the
// file holds.
type reopening struct {
	t    *testing.T
	path string
	svc  *engine.Direct
}

func (r *reopening) cycle() {
	r.t.Helper()
	if err := r.svc.Close(); err != nil {
		r.t.Fatal(err)
	}
	svc, err := engine.OpenDirect(context.Background(), r.path, repo.Options{}, service.Config{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.svc = svc
}

func (r *reopening) Clock() (int64, bool) { return r.svc.Clock() }
func (r *reopening) Advance(ctx context.Context, ts int64) error {
	defer r.cycle()
	return r.svc.Advance(ctx, ts)
}
func (r *reopening) Acquire(ctx context.Context, ts int64, q lk.AcquireRequest) (lk.AcquireResult, error) {
	defer r.cycle()
	return r.svc.Acquire(ctx, ts, q)
}
func (r *reopening) Renew(ctx context.Context, ts int64, q lk.RenewRequest) (lk.RenewResult, error) {
	defer r.cycle()
	return r.svc.Renew(ctx, ts, q)
}
func (r *reopening) Release(ctx context.Context, ts int64, q lk.ReleaseRequest) (lk.ReleaseResult, error) {
	defer r.cycle()
	return r.svc.Release(ctx, ts, q)
}
func (r *reopening) Inspect(ctx context.Context, ts int64, q lk.InspectRequest) (lk.InspectResult, error) {
	defer r.cycle()
	return r.svc.Inspect(ctx, ts, q)
}
func (r *reopening) Write(ctx context.Context, ts int64, q lk.WriteRequest) (lk.WriteResult, error) {
	defer r.cycle()
	return r.svc.Write(ctx, ts, q)
}
func (r *reopening) Read(ctx context.Context, ts int64, q lk.ReadRequest) (lk.ReadResult, error) {
	defer r.cycle()
	return r.svc.Read(ctx, ts, q)
}
func (r *reopening) Status(ctx context.Context, ts int64, q lk.StatusRequest) (lk.StatusResult, error) {
	defer r.cycle()
	return r.svc.Status(ctx, ts, q)
}

// engineCalls counts the operations ops runs, each repeat's runs included.
func engineCalls(ops []any) int64 {
	var n int64
	for _, op := range ops {
		n++
		if a, ok := op.([]any); ok && len(a) == 5 && a[0] == "repeat" {
			for _, v := range a[2:] {
				if num, ok := v.(json.Number); ok {
					if c, err := num.Int64(); err == nil && c > 0 {
						n += c
						break
					}
				}
			}
		}
	}
	return n
}

// TestGoldenAcrossReopens replays the golden cases with the database closed
// and reopened between operations: the results must not change.
func TestGoldenAcrossReopens(t *testing.T) {
	for _, c := range testutil.GoldenCases(t) {
		if engineCalls(c.Ops) > 100 {
			continue // long repeat drives: covered by TestGolden
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "reopen.db")
			svc, err := engine.OpenDirect(context.Background(), path, repo.Options{}, service.Config{})
			if err != nil {
				t.Fatal(err)
			}
			e := &reopening{t: t, path: path, svc: svc}
			defer func() { e.svc.Close() }()
			got, err := harness.Run(context.Background(), e, c.Ops)
			if err != nil {
				t.Fatal(err)
			}
			if d := harness.Diff(c.Ops, c.Want, got); d != "" {
				t.Errorf("%s\n%s", c.Path, d)
			}
		})
	}
}
