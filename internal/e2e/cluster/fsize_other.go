//go:build !linux

package cluster

import "errors"

var errNoPrlimit = errors.New("a file size limit on a running process needs Linux (prlimit64)")

func setFileSizeLimit(pid int, limit int64) error { return errNoPrlimit }

func errUnsupported(err error) bool { return errors.Is(err, errNoPrlimit) }
