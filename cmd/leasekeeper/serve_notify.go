package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// notifyServiceManager sends state, such as "READY=1", to the service
// manager that started serve, as sd_notify(3) does: one datagram to the
// unix socket named by $NOTIFY_SOCKET, a path or, after '@', an abstract
// name. systemd sets the variable for a unit of Type=notify
// (deploy/systemd/leasekeeper.service) and waits for READY=1 before it
// counts the unit as started; without it, this does nothing.
func notifyServiceManager(state string) error {
	socket := os.Getenv("NOTIFY_SOCKET")
	if socket == "" {
		return nil
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return fmt.Errorf("NOTIFY_SOCKET=%q: only a unix socket path or an abstract name (@...) is supported", socket)
	}
	// Go turns a leading '@' into the NUL byte of Linux's abstract names.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return nil
}
