package main

import (
	"errors"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

func newHistoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history LOCK | history --client CLIENT",
		Short: "Print who held a lock's tokens, or a client's grants, and how each lease ended",
		Long: `history prints one line per grant of LOCK's history, newest token first, or,
with --client and no LOCK, of CLIENT's across locks, newest grant first:
{"lock", "token", "client", "mode", "granted_at", "expires_at", "ended_at",
"ended"}. ended is "released", "lapsed", "revoked" or "aborted" (the holder
was a deadlock victim), and ended_at when; both are null while the lease is
live. A lapse ended at its expires_at. It reads the server's pages of 100
until the last, or stops after --limit grants.

Exit status: 0 answered; 1 an error result; 2 usage; 3 no answer from the server.`,
	}
	var who string
	var limit int
	cmd.Flags().StringVar(&who, "client", "", "the client whose grants to print, instead of a lock's")
	cmd.Flags().IntVar(&limit, "limit", 0, "print at most this many grants (default: all the history keeps)")
	cmd.Args = func(_ *cobra.Command, args []string) error {
		if (len(args) == 1) == (who != "") {
			return usageError{errHistoryArgs}
		}
		return nil
	}
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		req := lk.HistoryRequest{Client: who}
		if len(args) == 1 {
			req.Lock = args[0]
		}
		if limit > 0 && limit < lk.DefaultLocksLimit {
			req.Limit = limit
		}
		n := 0
		for g, err := range c.AllHistory(cmd.Context(), req) {
			if err != nil {
				return printAnswer(cmd, nil, err)
			}
			printJSON(cmd, g)
			if n++; limit > 0 && n >= limit {
				break
			}
		}
		return nil
	})
}

var errHistoryArgs = errors.New("history takes a LOCK, or --client CLIENT and no LOCK")
