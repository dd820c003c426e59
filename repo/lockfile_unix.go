//go:build unix

package repo

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive flock without waiting. A flock belongs to the
// open file, not to the process: a second Open in the same process is
// refused too, and closing f lets it go.
func tryLock(f *os.File) (held bool, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if lerr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return lerr == nil, lerr
}
