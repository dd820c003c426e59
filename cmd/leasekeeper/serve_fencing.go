package main

import "github.com/spf13/cobra"

// addFencingFlag adds serve's --strict-fencing (service.Config.StrictFencing);
// strictFencing reads it back.
func addFencingFlag(cmd *cobra.Command) {
	cmd.Flags().Bool("strict-fencing", true,
		"accept a fenced-store write only with a token granted for its lock: a higher one answers token_not_granted "+
			"(false: the contract's rule L6, any token at least the highest accepted)")
}

func strictFencing(cmd *cobra.Command) bool {
	on, _ := cmd.Flags().GetBool("strict-fencing")
	return on
}
