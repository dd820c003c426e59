package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print leasekeeper's version",
		Long: `version prints this binary's version (CHANGELOG.md), the HTTP API's version
and the Go it was built with. A server tells its version at GET /v1/health.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "leasekeeper %s (API v1, %s)\n", lk.Version, runtime.Version())
			return nil
		},
	}
}
