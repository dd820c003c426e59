package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// addReadyFileFlag adds serve's --ready-file.
func addReadyFileFlag(cmd *cobra.Command) {
	cmd.Flags().String("ready-file", "", "once listening, write the bound address (host:port) and a newline to this file; removed at a graceful stop")
}

// writeReadyFile writes addr to serve's --ready-file, if one was given, and
// returns what removes it. A harness or a service manager that started serve
// with --listen 127.0.0.1:0 learns the port from it without reading the
// log, and learns that the server listens: the file appears only once the
// listener is bound and the database open. It is written to a temporary
// name and renamed, so that a reader never sees half an address.
func writeReadyFile(cmd *cobra.Command, addr net.Addr) (remove func(), err error) {
	path, _ := cmd.Flags().GetString("ready-file")
	if path == "" {
		return func() {}, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, usageError{fmt.Errorf("--ready-file: %w", err)}
	}
	_, err = fmt.Fprintln(tmp, addr.String())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("--ready-file: %w", err)
	}
	return func() { os.Remove(path) }, nil
}
