//go:build !linux

package server

import "net"

// pending: this system does not tell (reclaim then waits reclaimNewAfter).
func pending(net.Conn) (has, known bool) { return false, false }
