package main

import (
	"bytes"
	"fmt"
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

// TestServeNotify: under a service manager of Type=notify (systemd), serve
// sends READY=1 on $NOTIFY_SOCKET once it answers requests, and STOPPING=1
// when a stop begins; to a socket path and to an abstract name (@...),
// each read here from a real unixgram socket as systemd reads it.
func TestServeNotify(t *testing.T) {
	bin := buildBinary(t)
	for _, kind := range []string{"path", "abstract"} {
		t.Run(kind, func(t *testing.T) {
			// A short directory: a socket's path must fit in 108 bytes.
			dir, err := os.MkdirTemp("", "lk-notify-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			name := filepath.Join(dir, "notify")
			if kind == "abstract" {
				name = fmt.Sprintf("@leasekeeper-test-notify-%d", os.Getpid())
			}
			sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()

			cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "notify.db"), "--listen", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+name)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("serve's log:\n%s", stderr.String())
				}
			})
			read := func(what string) string {
				t.Helper()
				sock.SetReadDeadline(time.Now().Add(20 * time.Second))
				buf := make([]byte, 4096)
				n, err := sock.Read(buf)
				if err != nil {
					t.Fatalf("waiting for %s on NOTIFY_SOCKET: %v", what, err)
				}
				return string(buf[:n])
			}

			msg := read("READY=1")
			lines := strings.Split(msg, "\n")
			if lines[0] != "READY=1" || len(lines) != 2 || !strings.HasPrefix(lines[1], "STATUS=listening on http://127.0.0.1:") {
				t.Fatalf("first notification %q, want READY=1 and STATUS=listening on http://127.0.0.1:PORT", msg)
			}
			// Ready means serving: the address of STATUS answers at once.
			url := strings.TrimPrefix(lines[1], "STATUS=listening on ")
			resp, err := validated(t).Get(url + "/v1/ready")
			if err != nil {
				t.Fatalf("GET /v1/ready just after READY=1: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /v1/ready just after READY=1: HTTP %d", resp.StatusCode)
			}

			cmd.Process.Signal(syscall.SIGTERM)
			if msg := read("STOPPING=1"); msg != "STOPPING=1" {
				t.Errorf("notification after SIGTERM %q, want STOPPING=1", msg)
			}
			select {
			case err := <-exited:
				exited <- err // for the cleanup
				if err != nil {
					t.Errorf("serve after SIGTERM: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not exit after SIGTERM")
			}
		})
	}
}

// TestServeNotifyUnreachable: a NOTIFY_SOCKET nobody listens on is logged,
// and serve serves all the same.
func TestServeNotifyUnreachable(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "serve.addr")
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "n.db"), "--listen", "127.0.0.1:0", "--ready-file", readyFile)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+filepath.Join(dir, "nobody"))
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { cmd.Process.Kill(); <-exited }()
	const logged = "could not tell the service manager that serve is ready"
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(stderr.String(), logged); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve's log does not say that the notification failed:\n%s", stderr.String())
		}
	}
	addr, err := os.ReadFile(readyFile)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := validated(t).Get("http://" + strings.TrimSpace(string(addr)) + "/v1/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/ready of a serve that could not notify: HTTP %d", resp.StatusCode)
	}
}
