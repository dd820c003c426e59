package cluster

import (
	"bufio"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// Job is a client process of a scenario, such as a job holding a lock
// that the test stops with SIGSTOP past its ttl (incident INC-5127). It
// reports on its standard output, one line at a time; its standard error
// goes to the test's log when the test fails. Pause and Resume are noted
// as faults in the History, with Server -1: no server was touched.
type Job struct {
	t      testing.TB
	h      *history.History
	name   string
	cmd    *exec.Cmd
	lines  chan []byte
	exited chan struct{}
	mu     sync.Mutex
	stderr []byte
	err    error // cmd.Wait's
}

// StartJob starts cmd (whose Stdout and Stderr must be unset) as a job
// named name, noting its faults in h. It dies with the test process and
// is killed by t.Cleanup if still running.
func StartJob(t testing.TB, h *history.History, name string, cmd *exec.Cmd) *Job {
	t.Helper()
	j := &Job{t: t, h: h, name: name, cmd: cmd, lines: make(chan []byte, 1024), exited: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("e2e: job %s: %v", name, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("e2e: job %s: %v", name, err)
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("e2e: job %s: %v", name, err)
	}
	var pipes sync.WaitGroup
	pipes.Go(func() {
		defer close(j.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			j.lines <- append([]byte(nil), sc.Bytes()...)
		}
	})
	pipes.Go(func() {
		b, _ := io.ReadAll(stderr)
		j.mu.Lock()
		j.stderr = b
		j.mu.Unlock()
	})
	go func() {
		pipes.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		j.mu.Lock()
		j.err = err
		j.mu.Unlock()
		close(j.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-j.exited:
		default:
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Process.Signal(syscall.SIGCONT)
			<-j.exited
		}
		if t.Failed() {
			j.mu.Lock()
			t.Logf("e2e: job %s's standard error:\n%s", name, j.stderr)
			j.mu.Unlock()
		}
	})
	return j
}

// Lines are the job's standard output, a line at a time; closed at its end.
func (j *Job) Lines() <-chan []byte { return j.lines }

// Pause stops the job with SIGSTOP and waits until every thread of it is
// stopped.
func (j *Job) Pause() {
	j.t.Helper()
	j.signal("pause-job", syscall.SIGSTOP, true)
}

// Resume continues the job with SIGCONT.
func (j *Job) Resume() {
	j.t.Helper()
	j.signal("resume-job", syscall.SIGCONT, false)
}

func (j *Job) signal(kind string, sig syscall.Signal, stopped bool) {
	j.t.Helper()
	if j.h != nil {
		j.h.Fault(kind, -1, 0, 0)
	}
	if err := j.cmd.Process.Signal(sig); err != nil {
		j.t.Fatalf("e2e: %s of job %s: %v", kind, j.name, err)
	}
	if !waitStopped(j.cmd.Process.Pid, stopped, 10*time.Second) {
		j.t.Fatalf("e2e: %s of job %s: its threads did not follow within 10 s", kind, j.name)
	}
}

// Wait waits up to timeout for the job to end and returns its exit error
// (nil for status 0); it fails the test if the job is still running then.
func (j *Job) Wait(timeout time.Duration) error {
	j.t.Helper()
	select {
	case <-j.exited:
	case <-time.After(timeout):
		j.t.Fatalf("e2e: job %s still running after %v", j.name, timeout)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Stderr is what the job wrote on its standard error, once it ended.
func (j *Job) Stderr() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return string(j.stderr)
}
