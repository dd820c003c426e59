package scale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/model"
	"github.com/leasekeeper/leasekeeper/internal/scale"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

var update = flag.Bool("update", false, "rewrite testdata/scale from the generators")

// TestScenarioFiles keeps testdata/scale, the files `leasekeeper run` is
// timed on, equal to the generators at full size.
func TestScenarioFiles(t *testing.T) {
	dir := filepath.Join(testutil.RepoRoot(t), "testdata", "scale")
	for _, s := range scale.All(1) {
		path := filepath.Join(dir, s.Name+".json")
		if *update {
			os.MkdirAll(dir, 0o755)
			if err := os.WriteFile(path, s.JSON(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate with -update)", err)
		}
		if !bytes.Equal(got, s.JSON()) {
			t.Errorf("%s differs from its generator; regenerate with -update", path)
		}
		if n := scale.Count(s.Ops) + scale.Count(s.Setup); n < 6000 || n > 50000 {
			t.Errorf("%s runs %d operations; scenarios are sized 6,000-50,000", s.Name, n)
		}
	}
}

// TestScenariosMatchModel: on every scale scenario, every result of the
// SQLite service equals the reference model's. No timing here; the
// benchmarks measure.
func TestScenariosMatchModel(t *testing.T) {
	size := 1.0
	if testing.Short() {
		size = 0.25
	}
	for _, s := range scale.All(size) {
		t.Run(s.Name, func(t *testing.T) {
			ops := append(append([]any{}, s.Setup...), s.Ops...)
			got, err := harness.Run(context.Background(), testutil.OpenDirect(t, repo.MemoryPath, service.Config{}), ops)
			if err != nil {
				t.Fatal(err)
			}
			raw := make([]json.RawMessage, len(ops))
			for i, o := range ops {
				raw[i], _ = json.Marshal(o)
			}
			want := model.Run(raw)
			if d := harness.Diff(ops, want, got); d != "" {
				t.Errorf("service (got) and model (want) disagree:\n%.3000s", d)
			}
			// A scenario is a drive, not a validation test: a malformed
			// repeat would time nothing.
			for i, r := range got {
				if str, ok := r.(string); ok && str == "error: invalid arguments" {
					t.Errorf("op %d is malformed: %v", i, ops[i])
				}
			}
		})
	}
}

// BenchmarkScenario times each scenario's operations (not its setup) on the
// SQLite service in memory, and on the reference model beside it.
func BenchmarkScenario(b *testing.B) {
	ctx := context.Background()
	for _, s := range scale.All(1) {
		raw := func(ops []any) []json.RawMessage {
			out := make([]json.RawMessage, len(ops))
			for i, o := range ops {
				out[i], _ = json.Marshal(o)
			}
			return out
		}
		b.Run(s.Name+"/sqlite", func(b *testing.B) {
			// The process's CPU time beside the wall time: on a shared
			// machine the wall time includes waiting for a core.
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				svc := testutil.OpenDirect(b, repo.MemoryPath, service.Config{})
				if _, err := harness.Run(ctx, svc, s.Setup); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0 := cpuTime()
				if _, err := harness.Run(ctx, svc, s.Ops); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				b.StopTimer()
				svc.Close()
				b.StartTimer()
			}
			ops := float64(b.N) * float64(scale.Count(s.Ops))
			b.ReportMetric(float64(b.Elapsed().Microseconds())/ops, "us/op")
			if cpu > 0 {
				b.ReportMetric(float64(cpu.Microseconds())/ops, "cpu-us/op")
			}
		})
		b.Run(s.Name+"/model", func(b *testing.B) {
			setup, ops := raw(s.Setup), raw(s.Ops)
			for b.Loop() {
				b.StopTimer()
				m := model.New()
				for _, o := range setup {
					m.Step(o)
				}
				b.StartTimer()
				for _, o := range ops {
					m.Step(o)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(scale.Count(s.Ops)), "us/op")
		})
	}
}
