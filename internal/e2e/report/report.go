// Package report writes out what a robustness run leaves to read after
// it (docs/robustness.md): the history as JSON lines (history.jsonl),
// porcupine's picture of a history with no linearization
// (linearization.html), and the end of a server's log when a test failed
// or a server did not start. Verify (package validate) and the cluster
// call it; the files go to the test's artifact directory, kept by go test
// -artifacts.
package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/model"
)

// writeHistory writes h as JSON lines, for reading a failed run: a first
// line with the start's wall-clock time, then the operations and faults by
// time (an operation at its call).
func writeHistory(w io.Writer, h *history.History) error {
	ops, faults := h.Ops(), h.Faults()
	type line struct {
		at int64
		v  any
	}
	var lines []line
	for _, op := range ops {
		lines = append(lines, line{op.Call, op})
	}
	for _, f := range faults {
		lines = append(lines, line{f.At, f})
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(map[string]any{"start": h.Start().Format(time.RFC3339Nano), "ops": len(ops), "faults": len(faults)}); err != nil {
		return err
	}
	for _, l := range lines {
		if err := enc.Encode(l.v); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// SaveHistory writes h to path as JSON lines (history.jsonl): a first line
// with the start's wall-clock time, then the operations and faults by time
// (an operation at its call).
func SaveHistory(path string, h *history.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeHistory(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SaveLinearization writes porcupine's picture of the longest partial
// linearizations it found (linearization.html) to path.
func SaveLinearization(path string, info porcupine.LinearizationInfo) error {
	return porcupine.VisualizePath(model.Model, info, path)
}

// Tail returns the last n lines of the file at path: of a server's log,
// for a test that failed or a server that did not start.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
