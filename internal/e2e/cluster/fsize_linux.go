package cluster

import (
	"fmt"
	"syscall"
	"unsafe"
)

// rlimit64 is the kernel's struct rlimit64, as prlimit64 takes it.
type rlimit64 struct{ cur, max uint64 }

// setFileSizeLimit sets the soft RLIMIT_FSIZE of the running process pid
// to limit bytes (unlimited when limit < 0), keeping its hard limit, so
// that the limit can be raised again without privilege. A process over the
// limit gets SIGXFSZ, which a Go program ignores unless it asked for it
// (os/signal), and its write fails with EFBIG: a full disk, for one
// process, on a running server.
func setFileSizeLimit(pid int, limit int64) error {
	var old rlimit64
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		0, uintptr(unsafe.Pointer(&old)), 0, 0); e != 0 {
		return fmt.Errorf("prlimit64(%d, RLIMIT_FSIZE) to read: %w", pid, e)
	}
	lim := rlimit64{cur: ^uint64(0), max: old.max} // RLIM_INFINITY
	if limit >= 0 {
		lim.cur = min(uint64(limit), old.max)
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE,
		uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
		return fmt.Errorf("prlimit64(%d, RLIMIT_FSIZE, %d): %w", pid, limit, e)
	}
	return nil
}

// errUnsupported: prlimit64 exists on every Linux this runs on.
func errUnsupported(error) bool { return false }
