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

// backlogged reports whether a connection waits in ln's accept queue, and
// whether it could tell: a listening socket polls readable when one does.
func backlogged(ln net.Listener) (has, known bool) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	type pollFd struct {
		fd             int32
		events, revent int16
	}
	const pollIn = 0x1
	var n uintptr
	var errno syscall.Errno
	if err := raw.Control(func(fd uintptr) {
		p := pollFd{fd: int32(fd), events: pollIn}
		n, _, errno = syscall.Syscall(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&syscall.Timespec{})))
	}); err != nil || errno != 0 {
		return false, false
	}
	return n > 0, true
}
