package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeReadyFile: with --listen 127.0.0.1:0 and --ready-file, serve
// writes the address it bound, on one line, once it listens; the address
// answers GET /v1/ready with 200; a graceful stop removes the file.
func TestServeReadyFile(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "serve.addr")
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "ready.db"), "--listen", "127.0.0.1:0", "--ready-file", readyFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once serve is gone, waitErr then being its status.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	var b []byte
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(readyFile); err == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("serve exited before writing %s: %v\n%s", readyFile, waitErr, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 15 s:\n%s", readyFile, stderr.String())
		}
	}
	addr, ok := strings.CutSuffix(string(b), "\n")
	host, port, err := net.SplitHostPort(addr)
	if !ok || err != nil || host != "127.0.0.1" || port == "0" || strings.Contains(addr, "\n") {
		t.Fatalf("--ready-file holds %q, want 127.0.0.1:PORT and a newline", b)
	}
	resp, err := validated(t).Get("http://" + addr + "/v1/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/ready at the address of --ready-file: HTTP %d", resp.StatusCode)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
		t.Errorf("%s after a graceful stop: %v, want it removed", readyFile, err)
	}
}

// TestServeReadyFileUnwritable: a --ready-file that cannot be written stops
// serve with an error naming the flag, rather than leave a harness waiting.
func TestServeReadyFileUnwritable(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	out, err := exec.Command(bin, "serve", "--db", filepath.Join(dir, "ready.db"), "--listen", "127.0.0.1:0",
		"--ready-file", filepath.Join(dir, "missing", "serve.addr")).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--ready-file") {
		t.Errorf("serve with --ready-file in a missing directory: %v\n%s", err, out)
	}
}
