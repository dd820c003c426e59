package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
)

// versionLine is the one answer of `leasekeeper version` and `leasekeeper
// --version`: this binary's version (CHANGELOG.md), the HTTP API's and the
// Go it was built with.
func versionLine() string {
	return fmt.Sprintf("leasekeeper %s (API v1, %s)", lk.Version, runtime.Version())
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print leasekeeper's version",
		Long: `version prints this binary's version (CHANGELOG.md), the HTTP API's version
and the Go it was built with, as --version does. A server tells its version
at GET /v1/health.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}
