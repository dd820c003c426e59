package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

func newRunCmd() *cobra.Command {
	var dbPath string
	var check bool
	var cpuProfile string
	var stmtStats bool
	cmd := &cobra.Command{
		Use:   "run [--db PATH] [FILE|-]",
		Short: "Replay a JSON array of operations against a fresh service",
		Long: `run reads a JSON array of operations from FILE (standard input when FILE is
absent or "-"), executes them in order against a fresh service, and prints a
JSON array with one result per operation on standard output.

Each operation is [name, ts, args...], for example
  [["acquire", 0, "etl-a", "exports/daily", 30], ["inspect", 5, "exports/daily"]]
Errors are results ("error: not holder"), never crashes. A case file
{"ops": [...], "want": [...]} (as in testdata/golden) is accepted too: its ops
are replayed, and with --check the results are compared with its want: a
difference fails (exit 1), a match says so on standard error.

The service's state lives in memory unless --db names a SQLite file or a
PostgreSQL database (a postgres:// URL); it must be new or empty, and after
the run it holds the final lock state for sqlite3 or psql to read (tables
locks, leases, grants, queue_entries, clients, store_fences, store_values).
The grant history is kept as serve keeps it by default (the ended grants of
each lock's last 1,000 tokens, for 30 days of the replay's time).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError{err}
				}
				defer f.Close()
				in = f
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runReplay(cmd, in, dbPath, check, stmtStats)
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", "", "SQLite file or postgres:// URL to keep the state in (default: in memory)")
	cmd.Flags().BoolVar(&stmtStats, "stmt-stats", false, "print each SQL statement's count and time to stderr")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a pprof CPU profile of the replay to this file")
	cmd.Flags().BoolVar(&check, "check", false, "compare the results with the case file's \"want\"; exit 1 on a difference")
	return cmd
}

func printStats(w io.Writer, total time.Duration, stats []repo.StatementStats) {
	var inSQL time.Duration
	for _, st := range stats {
		inSQL += st.Total
	}
	fmt.Fprintf(w, "replay %v, of which %v in SQL statements\n", total.Round(time.Millisecond), inSQL.Round(time.Millisecond))
	fmt.Fprintf(w, "%9s %10s %8s  %s\n", "count", "total", "each", "statement")
	for _, st := range stats {
		fmt.Fprintf(w, "%9d %10s %7.1fus  %.100s\n", st.Count, st.Total.Round(100*time.Microsecond),
			float64(st.Total.Microseconds())/float64(st.Count), st.Query)
	}
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func runReplay(cmd *cobra.Command, in io.Reader, dbPath string, check, stmtStats bool) error {
	input, err := harness.Decode(bufio.NewReader(in))
	if err != nil {
		return usageError{err}
	}
	if check && input.Want == nil {
		return usageError{fmt.Errorf("--check needs a case file with a \"want\" array")}
	}
	ctx := cmd.Context()
	path := repo.MemoryPath
	if dbPath != "" {
		path = dbPath
	}
	svc, err := engine.OpenDirect(ctx, path, repo.Options{}, service.Config{})
	if err != nil {
		return err
	}
	defer svc.Close()
	if _, used := svc.Clock(); used {
		return usageError{fmt.Errorf("%s already holds leasekeeper state; run replays against a fresh service, so give it a new file or an empty database", repo.Redacted(dbPath))}
	}
	if stmtStats {
		svc.CollectStats()
	}
	start := time.Now()
	results, err := harness.Run(ctx, svc, input.Ops)
	if err != nil {
		return err
	}
	if stmtStats {
		printStats(cmd.ErrOrStderr(), time.Since(start), svc.Stats())
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	if err := harness.Encode(w, results); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if check {
		if diff := harness.Diff(input.Ops, input.Want, results); diff != "" {
			return fmt.Errorf("results differ from want:\n%s", diff)
		}
		// A verdict on a pass too: results alone do not tell a passing
		// check from one that was never asked for.
		if len(results) == 1 {
			fmt.Fprintln(cmd.ErrOrStderr(), "1 result matches the file's want")
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "%d results match the file's want\n", len(results))
		}
	}
	return nil
}
