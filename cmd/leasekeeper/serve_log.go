package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/internal/telemetry"
)

// addLogFormatFlag adds --log-format: one format for every line serve
// writes to standard error, its log's and, without --audit-log, the audit
// log's. JSON by default, the audit log's format since it was first
// written (docs/observability.md), so that its readers go on reading it;
// text for a person at a terminal.
func addLogFormatFlag(cmd *cobra.Command) *string {
	return cmd.Flags().String("log-format", "json",
		"format of the lines on standard error, the log's and the audit log's: json or text (an --audit-log file is JSON lines whatever this says)")
}

// newServeLog returns serve's log, writing format's lines to w, and the
// format of audit lines written to w.
func newServeLog(w io.Writer, format string) (*slog.Logger, telemetry.Format, error) {
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: readableDurations})), telemetry.JSON, nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), telemetry.Text, nil
	}
	return nil, 0, usageError{fmt.Errorf("--log-format must be json or text, got %q", format)}
}

// readableDurations writes a duration as the text handler does ("2m0s"),
// not as slog's JSON handler does, in nanoseconds (120000000000).
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
