package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// addEventsFlags adds serve's --events-buffer (GET /v1/events);
// eventsBuffer reads it back.
func addEventsFlags(cmd *cobra.Command) {
	cmd.Flags().Int("events-buffer", engine.DefaultEventsBuffer,
		"GET /v1/events: how many recent events to keep for readers that resume (Last-Event-ID) or fall behind; older ones get a reset")
}

func eventsBuffer(cmd *cobra.Command) (int, error) {
	n, _ := cmd.Flags().GetInt("events-buffer")
	if n < 1 || n > 10_000_000 {
		return 0, usageError{fmt.Errorf("--events-buffer must be between 1 and 10000000, got %d", n)}
	}
	return n, nil
}
