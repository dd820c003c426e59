package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is a server this run started: leasekeeper serve or etcd. Its
// standard output and error go to a log file, shown when it fails. It runs
// in a process group of its own, so that a Ctrl-C reaches only this
// program, which then stops its servers itself, in order: clients first,
// then servers, then what they stored.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when it has exited
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// cpu is the CPU time the process has used so far; false once it has
// exited, or where /proc cannot tell.
func (p *process) cpu() (time.Duration, bool) {
	if p.exited() {
		return 0, false
	}
	return processCPU(p.cmd.Process.Pid)
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stopGrace is how long a server may take to stop after SIGTERM: serve
// stops within about 10 s whatever its clients do.
const stopGrace = 20 * time.Second

// stop sends SIGTERM to the process, and only to it, and waits for it to
// exit; one that does not within stopGrace is killed, and that is an error.
func (p *process) stop() error {
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not stop within %v of SIGTERM, and was killed; its log ends:\n%s", p.name, stopGrace, p.tail())
}

// tail is the end of the process's log.
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-15):]
	return "  " + strings.Join(lines, "\n  ")
}
