//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are the signals exec passes on to the command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// ownProcessGroup starts cmd in a process group of its own, so that a signal
// to the group reaches what the command started too (a shell's children).
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the command's process group.
func signalGroup(cmd *exec.Cmd, sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(-cmd.Process.Pid, s)
	}
}
