// Command leasekeeper is the leasekeeper lock service's one binary.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
)

// usageError marks a problem with what the user typed or fed in: exit status 2.
type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "leasekeeper:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "leasekeeper",
		Short: "A lock service with leases and fencing tokens, on one SQLite file",
		Long: `leasekeeper is a lock service for batch jobs. A job takes a named lock with a
time-limited lease, renews it while it works and releases it. Every grant
carries a fencing token, and the fenced store refuses writes with a token lower
than one it already accepted, so a job that stalled past its lease can never
overwrite its successor.`,
		Version:       lk.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// cobra's own template would print "leasekeeper version 0.2.0": one
	// answer for both ways of asking.
	root.SetVersionTemplate(versionLine() + "\n")
	// A flag pflag cannot parse is a usage error in every command (exit
	// 2), as one a command refuses after parsing is: a supervisor tells
	// a bad unit file from a server that failed by the status alone.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newRunCmd(), newBenchCmd(), newServeCmd(), newBackupCmd(), newVersionCmd())
	root.AddCommand(clientCommands()...)
	root.AddCommand(newFenceCmd())
	return root
}
