package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/model"
	"github.com/leasekeeper/leasekeeper/internal/scale"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

func newBenchCmd() *cobra.Command {
	var sizes string
	var runs int
	var only string
	var process bool
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Time the scale scenarios on SQLite and on the reference model",
		Long: `bench runs the scale scenarios of docs/contract.md section 6 (the files in
testdata/scale are the same scenarios at size 1) and prints a table of medians:

  process   'leasekeeper run FILE' on the whole file, process start included,
            against the budget 0.2 s + 50 us per operation
  sqlite    the scenario's operations in process on an in-memory database
            (setup, such as scenario 6's history, not timed)
  model     the same operations on the test-only reference model
  ratio     sqlite / model

The machine is shared and noisy: compare figures from one run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var fs []float64
			for _, s := range strings.Split(sizes, ",") {
				f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil || f <= 0 {
					return usageError{fmt.Errorf("--sizes: %q is not a positive number", s)}
				}
				fs = append(fs, f)
			}
			if runs < 1 {
				return usageError{fmt.Errorf("--runs must be at least 1")}
			}
			return bench(cmd.Context(), cmd.OutOrStdout(), fs, runs, only, process)
		},
	}
	cmd.Flags().StringVar(&sizes, "sizes", "1", "comma-separated scenario sizes (1 = full size), e.g. 0.25,0.5,1")
	cmd.Flags().IntVar(&runs, "runs", 5, "runs per measurement; the median is shown")
	cmd.Flags().StringVar(&only, "scenario", "", "only scenarios whose name contains this")
	cmd.Flags().BoolVar(&process, "process", true, "also time 'leasekeeper run' as a separate process")
	return cmd
}

func bench(ctx context.Context, w io.Writer, sizes []float64, runs int, only string, process bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "leasekeeper-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(w, "median of %d runs\n\n", runs)
	fmt.Fprintln(w, "| scenario | size | ops | process s | budget s | sqlite ms | sqlite us/op | model ms | ratio |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, size := range sizes {
		for _, s := range scale.All(size) {
			if only != "" && !strings.Contains(s.Name, only) {
				continue
			}
			all := scale.Count(s.Setup) + scale.Count(s.Ops)
			proc := "-"
			if process {
				file := filepath.Join(tmp, s.Name+".json")
				if err := os.WriteFile(file, s.JSON(), 0o644); err != nil {
					return err
				}
				d, err := median(runs, func() (time.Duration, error) { return timeProcess(self, file) })
				if err != nil {
					return fmt.Errorf("%s: %w", s.Name, err)
				}
				proc = fmt.Sprintf("%.2f", d.Seconds())
			}
			eng, err := median(runs, func() (time.Duration, error) { return timeEngine(ctx, s) })
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			mod, _ := median(runs, func() (time.Duration, error) { return timeModel(s), nil })
			ops := scale.Count(s.Ops)
			fmt.Fprintf(w, "| %s | %g | %d | %s | %.2f | %.0f | %.1f | %.0f | %.1f |\n", s.Name, size, all, proc,
				0.2+50e-6*float64(all), ms(eng), float64(eng.Microseconds())/float64(ops), ms(mod),
				float64(eng)/float64(max(mod, 1)))
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(n int, f func() (time.Duration, error)) (time.Duration, error) {
	ds := make([]time.Duration, 0, n)
	for range n {
		d, err := f()
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

func timeProcess(self, file string) (time.Duration, error) {
	cmd := exec.Command(self, "run", file)
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	return time.Since(start), err
}

func timeEngine(ctx context.Context, s scale.Scenario) (time.Duration, error) {
	svc, err := engine.OpenDirect(ctx, repo.MemoryPath, repo.Options{}, service.Config{})
	if err != nil {
		return 0, err
	}
	defer svc.Close()
	if _, err := harness.Run(ctx, svc, s.Setup); err != nil {
		return 0, err
	}
	start := time.Now()
	_, err = harness.Run(ctx, svc, s.Ops)
	return time.Since(start), err
}

func timeModel(s scale.Scenario) time.Duration {
	m := model.New()
	for _, o := range s.Setup {
		b, _ := json.Marshal(o)
		m.Step(b)
	}
	raw := make([]json.RawMessage, len(s.Ops))
	for i, o := range s.Ops {
		raw[i], _ = json.Marshal(o)
	}
	start := time.Now()
	for _, o := range raw {
		m.Step(o)
	}
	return time.Since(start)
}
