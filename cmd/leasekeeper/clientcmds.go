package main

import "github.com/spf13/cobra"

// clientCommands are the commands that talk to a running server
// (acquire, renew, release, inspect, status, write, read, exec).
func clientCommands() []*cobra.Command { return nil }
