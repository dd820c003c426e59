package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr makes a server die with the test process: a test killed by
// its timeout must not leave servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until every thread of pid is stopped (stopped true)
// or none is (false), for up to timeout. A SIGSTOP takes effect when each
// thread next enters the kernel: on a busy machine a thread may answer a
// request or two first, so a pause is not a pause until then.
func waitStopped(pid int, stopped bool, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Millisecond) {
		if allStopped(pid) == stopped {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// allStopped reports whether every thread of pid is in state T (stopped)
// or t (traced), from /proc.
func allStopped(pid int) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) || (s[i+2] != 'T' && s[i+2] != 't') {
			return false
		}
	}
	return true
}
