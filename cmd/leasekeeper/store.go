package main

import (
	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/client"
)

func newDeleteCmd() *cobra.Command {
	var clientID string
	var token int64
	cmd := &cobra.Command{
		Use:   "delete LOCK KEY --client ID --token N",
		Short: "Delete a key from the fenced store with a fencing token",
		Long: `delete removes KEY from LOCK's fenced store if --token is at least the
highest token the store accepted for LOCK, raising the fence to it as a
write would, and prints {"outcome": "ok", "deleted": true|false}: whether
the key had a value. --client is the client whose token it is: on a server
with --strict-fencing the token must have been granted to it.

Exit status: 0 deleted, or nothing to delete; 1 an error answer
("stale_token" when a higher token was accepted, "token_not_granted" when
--token was not granted to --client for LOCK); 2 usage; 3 no answer from
the server.`,
	}
	cmd.Flags().StringVar(&clientID, "client", "", "the client whose lease the token is (required)")
	cmd.Flags().Int64Var(&token, "token", 0, "the fencing token of the client's lease (required)")
	return clientCmd(cmd, 2, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "client", "token"); err != nil {
			return err
		}
		res, err := c.Delete(cmd.Context(), clientID, args[0], args[1], token)
		return printAnswer(cmd, res, err)
	})
}

func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Clean a lock's fenced store (store clear)",
	}
	clear := &cobra.Command{
		Use:   "clear LOCK",
		Short: "Remove every key of a lock's fenced store (admins only on a server with an auth file)",
		Long: `store clear removes every key of LOCK's fenced store, whoever wrote it, and
prints {"outcome": "ok", "keys": N, "bytes": M}: what it removed. The fence
stays where it was, so a stale holder's token is still refused. It is the
clean-up of a store that a holder filled and left (docs/operations.md).
With an auth file on the server, only an admin's token may clear a store.

Exit status: 0 answered; 1 an error answer ("forbidden" for a token that is
not an admin's); 2 usage; 3 no answer from the server.`,
	}
	cmd.AddCommand(clientCmd(clear, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		res, err := c.StoreClear(cmd.Context(), args[0])
		return printAnswer(cmd, res, err)
	}))
	return cmd
}
