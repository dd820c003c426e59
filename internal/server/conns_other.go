//go:build !linux

package server

import "net"

// pending: this system does not tell (reclaim then waits reclaimNewAfter).
func pending(net.Conn) (has, known bool) { return false, false }

// backlogged: this system does not tell (reclaim then takes a connection
// whose headers are late as if one waited).
func backlogged(net.Listener) (has, known bool) { return false, false }
