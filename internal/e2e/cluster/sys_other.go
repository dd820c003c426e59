//go:build !linux

package cluster

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot see a process's state here: it gives the signal a
// moment.
func waitStopped(pid int, stopped bool, timeout time.Duration) bool {
	time.Sleep(100 * time.Millisecond)
	return true
}
