//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// forwardedSignals are the signals exec passes on to the command.
var forwardedSignals = []os.Signal{os.Interrupt}

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(cmd *exec.Cmd) {}

// signalGroup sends sig to the command, killing it where sig cannot be sent.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if cmd.Process.Signal(sig) != nil {
		cmd.Process.Kill()
	}
}
