package main

import (
	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/client"
)

func newUnfenceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unfence LOCK",
		Short: "Set a lock's store fence back to its last issued token (admins only on a server with an auth file)",
		Long: `unfence repairs a lock whose fenced store accepted a write with a token never
granted for it (a server without --strict-fencing accepts one), so that no
holder's token reaches the fence again. It sets the fence back to the lock's
last issued token and prints {"outcome": "ok", "was": N, "highest": M}: the
fence before and now. A fence not above the last issued token is left as it
is (was = highest). The audit log records every unfence that changed a fence.
With an auth file on the server, only an admin's token may unfence.

Exit status: 0 answered; 1 an error answer ("forbidden" for a token that is
not an admin's, "unauthenticated" without a valid token); 2 usage; 3 no
answer from the server.`,
	}
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		res, err := c.Unfence(cmd.Context(), args[0])
		return printAnswer(cmd, res, err)
	})
}
