package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

func newWatchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "watch [--lock L] [--prefix P] [--client C] [--after ID]",
		Short: "Print the server's events as they are committed, one JSON line each",
		Long: `watch prints one line per event of GET /v1/events, as the server commits it,
until interrupted: {"id", "kind", "at", "lock", "client", "token", "mode"} and
what the kind adds (docs/api.md, "Events"). kind is grant, renew, release,
lapse, revoke, withdraw, queue, deadlock_abort, stale_write or unfence; or
reset, when events may have been missed (after a reconnection past the
server's buffer, or a restart): whatever was built from the earlier lines
should be read again. --lock, --prefix and --client select events; all given
must match, and may not be empty. --after resumes after the event with that id
(at least 0) (the server's
buffer permitting; a reset otherwise) instead of starting from now.

When the stream is cut, watch says so on standard error and reconnects,
resuming after the last event it printed.

Exit status: 0 interrupted; 1 an error result (a bad filter, a refused token);
2 usage.`,
		Args: cobra.NoArgs,
	}
	var f lk.EventFilter
	cmd.Flags().StringVar(&f.Lock, "lock", "", "only this lock's events")
	cmd.Flags().StringVar(&f.Prefix, "prefix", "", "only the events of locks whose names start with this")
	cmd.Flags().StringVar(&f.Client, "client", "", "only this client's events")
	var after int64
	cmd.Flags().Int64Var(&after, "after", -1, "resume after the event with this id (default: from now on)")
	return clientCmd(cmd, 0, func(cmd *cobra.Command, _ []string, c *client.Client) error {
		// An empty filter would match everything, and a negative --after
		// start from now: neither is what was typed.
		for _, n := range []string{"lock", "prefix", "client"} {
			if cmd.Flags().Changed(n) && cmd.Flags().Lookup(n).Value.String() == "" {
				return usageError{fmt.Errorf("--%s must not be empty: leave it out to match all", n)}
			}
		}
		if cmd.Flags().Changed("after") && after < 0 {
			return usageError{fmt.Errorf("--after must be an event's id, at least 0")}
		}
		for e, err := range c.WatchFrom(cmd.Context(), f, after) {
			if errors.Is(err, client.ErrReconnecting) {
				fmt.Fprintln(cmd.ErrOrStderr(), "leasekeeper:", err)
				continue
			}
			if err != nil {
				return printAnswer(cmd, nil, err)
			}
			if e.Kind == lk.EventOverflow {
				fmt.Fprintln(cmd.ErrOrStderr(), "leasekeeper: fell behind the server's event buffer; reconnecting")
				continue
			}
			printJSON(cmd, e)
		}
		return nil
	})
}
