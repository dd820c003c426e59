package server

import (
	"net"
	"syscall"
	"unsafe"
)

// pending reports whether bytes received on conn wait to be read, and
// whether it could tell.
func pending(conn net.Conn) (has, known bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int32
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return false, false
	}
	return n > 0, true
}
