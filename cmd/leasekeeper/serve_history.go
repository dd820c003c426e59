package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/service"
)

// addHistoryFlags adds serve's --history-keep and --history-days
// (service.HistoryRetention); historyRetention reads them back.
func addHistoryFlags(cmd *cobra.Command) {
	cmd.Flags().Int64("history-keep", service.DefaultHistoryKeep,
		"grant history: keep the ended grants of each lock's last N tokens, pruned in steps of N/16 tokens (at least 1, at most 64) (a live lease's grant is always kept)")
	cmd.Flags().Int64("history-days", service.DefaultHistoryDays,
		"grant history: drop ended grants this many days after they ended")
}

func historyRetention(cmd *cobra.Command) (service.HistoryRetention, error) {
	keep, _ := cmd.Flags().GetInt64("history-keep")
	days, _ := cmd.Flags().GetInt64("history-days")
	if keep < 1 || days < 1 || days > 1<<40 {
		return service.HistoryRetention{}, usageError{fmt.Errorf("--history-keep and --history-days must be at least 1, got %d and %d", keep, days)}
	}
	return service.HistoryRetention{Keep: keep, Days: days}, nil
}
