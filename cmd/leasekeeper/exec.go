package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// Exit statuses of exec besides the command's own and those of acquire.
const (
	exitCannotRun = 126 // the command was found but could not be started
	exitNotFound  = 127 // the command was not found
)

func newExecCmd() *cobra.Command {
	var grace int64
	cmd := &cobra.Command{
		Use:   "exec LOCK --client ID --ttl N [--shared] [--wait SECONDS] [--grace SECONDS] -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock, like flock(1) for the fleet",
		Long: `exec acquires LOCK for --client (waiting up to --wait seconds), runs COMMAND
while it keeps the lease alive, renewing it about every third of --ttl, and
releases the lock when COMMAND exits. COMMAND's standard input, output and
error are exec's own; its environment has, besides exec's:

  LEASEKEEPER_LOCK     the lock
  LEASEKEEPER_CLIENT   the client
  LEASEKEEPER_TOKEN    the lease's fencing token, for the fenced store
  LEASEKEEPER_SERVER   the server's URL
  LEASEKEEPER_CA_FILE  the CA file of --ca-file (or of exec's own environment),
                       as an absolute path, for an https server
  LEASEKEEPER_PREDECESSOR_ENDED
                       how the worst of the leases before this grant ended:
                       lapsed, revoked, aborted or released (worst first);
                       absent when the grant had no predecessor. After
                       lapsed or revoked, the last holder may have left its
                       work half-done.

While it waits for the lock, exec prints the client's position in the queue
on standard error when it changes (every 30 seconds if not). If the acquire
gets no answer (the server died or restarted during the wait), its request
may still be queued: exec withdraws it, sending the release again until the
server answers or --wait plus --ttl has passed, and does not run COMMAND.

If the lease is lost while COMMAND runs (the server refused a renew: released
from elsewhere, lapsed, or the client was aborted as a deadlock victim; or no
renew succeeded before the lease ran out), exec sends SIGTERM to COMMAND, then
SIGKILL after --grace seconds. COMMAND runs in a process group of its own, so
that these signals, and the SIGINT, SIGTERM, SIGHUP or SIGQUIT that exec
itself receives and passes on, reach what it started too; a COMMAND that reads
from the terminal is therefore stopped (SIGTTIN): give it another standard
input.

Exit status:
  COMMAND's own      when it ran and the lease was kept; 128+N if it died of signal N
  75                 the lock was not obtained: still queued when the wait ran out,
                     or the acquire got no answer; the request is withdrawn
  76                 the lock was not obtained: aborted as a deadlock victim
  77                 the lease was lost while COMMAND ran
  1                  the lock was not obtained: an error result ("error: client busy", ...),
                     or the request withdrawn from elsewhere during the wait
  2                  usage
  3                  no answer from the server (when the acquire got none, nor did
                     the withdraw: the client may stay queued until released)
  126, 127           COMMAND could not be started, or was not found
  128+N              exec received signal N before COMMAND started

Messages about all of these go to standard error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if len(args) < 2 || (dash != -1 && dash != 1) {
				return usageError{fmt.Errorf("exec takes LOCK, then -- and the command to run")}
			}
			return nil
		},
	}
	options := acquireFlags(cmd, "the lease's length in seconds (required); it is renewed every third",
		"seconds to wait for the lock while queued")
	cmd.Flags().Int64Var(&grace, "grace", 10, "seconds between SIGTERM and SIGKILL when the lease is lost")
	return clientCmd(cmd, -1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		opts, err := options(cmd)
		if err != nil {
			return err
		}
		g, err := seconds("grace", grace)
		if err != nil || g < 0 {
			return usageError{fmt.Errorf("--grace must be a number of seconds >= 0")}
		}
		e := &execution{
			c: c, lock: args[0], argv: args[1:], opts: opts, grace: g, caFile: commandCAFile(cmd, c),
			stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
		}
		code := e.run()
		if code != 0 {
			return exitStatus{code: code}
		}
		return nil
	})
}

// execution is one run of exec.
type execution struct {
	c      *client.Client
	lock   string
	argv   []string
	opts   client.AcquireOptions
	grace  time.Duration
	caFile string // the CA file the client trusts, absolute, for the command's environment; "" for none
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func (e *execution) logf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "leasekeeper: exec: "+format+"\n", args...)
}

// run acquires, runs the command under the lease and releases; it returns
// the exit status (see the command's help).
func (e *execution) run() int {
	// exec answers signals itself, from the start: during the wait they
	// withdraw the request, while the command runs they are passed on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	lease, code := e.acquire(sigs)
	if lease == nil {
		return code
	}
	code = e.runCommand(lease, sigs)
	lost := lease.Err() != nil // before Release, which ends the lease too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := lease.Release(ctx); err != nil && !lost {
		e.logf("releasing %q: %v (the lease lapses at %s)", e.lock, err, lease.ExpiresAt().Format(time.RFC3339))
	}
	return code
}

// acquire takes the lock, or returns the exit status saying why not.
func (e *execution) acquire(sigs <-chan os.Signal) (*client.Lease, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lease *client.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		l, err := e.c.Acquire(ctx, e.lock, e.opts)
		done <- result{l, err}
	}()
	stopWatching := func() {}
	if e.opts.Wait > 0 {
		stopWatching = e.watchPosition()
	}
	var r result
	select {
	case r = <-done:
		stopWatching()
	case sig := <-sigs:
		stopWatching()
		cancel() // Acquire withdraws the request
		select {
		case r = <-done:
		case again := <-sigs:
			// The withdraw waits for a server that does not answer: a
			// second signal leaves at once, and says what may be left.
			e.logf("interrupted again by %v while withdrawing the request: %s may stay queued for %q until released (leasekeeper release %s --client %s)",
				again, e.opts.Client, e.lock, e.lock, e.opts.Client)
			return nil, 128 + signalNumber(again)
		}
		if r.lease != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			r.lease.Release(rctx)
			rcancel()
		}
		var unknown *client.UnknownOutcomeError
		if errors.As(r.err, &unknown) && unknown.WithdrawErr != nil {
			e.logf("interrupted by %v while acquiring %q: %v", sig, e.lock, unknown)
		} else {
			e.logf("interrupted by %v while acquiring %q", sig, e.lock)
		}
		return nil, 128 + signalNumber(sig)
	}
	var res *client.Error
	var unknown *client.UnknownOutcomeError
	var queued *client.QueuedError
	switch err := r.err; {
	case err == nil:
		return r.lease, 0
	case errors.As(err, &unknown) && unknown.WithdrawErr == nil:
		// The server died or failed during the acquire, and then
		// confirmed the withdraw: not obtained, as if the wait had run out.
		e.logf("%q not obtained: %v", e.lock, err)
		return nil, exitQueued
	case errors.As(err, &unknown):
		e.logf("no answer from the server: %v", err)
		return nil, exitNoAnswer
	case errors.As(err, &queued) && queued.WithdrawErr != nil:
		// Still queued, and the withdraw was never confirmed: the client
		// may stay queued, which 75 would deny.
		e.logf("%q not obtained, and the request may still be queued: %v", e.lock, err)
		return nil, exitNoAnswer
	case errors.Is(err, client.ErrQueued):
		e.logf("%q not obtained: %v when the wait ran out", e.lock, err)
		return nil, exitQueued
	case errors.Is(err, client.ErrDeadlock):
		e.logf("%q not obtained: %v", e.lock, err)
		return nil, exitDeadlock
	case errors.Is(err, client.ErrWithdrawn), errors.As(err, &res):
		e.logf("%q not obtained: %v", e.lock, err)
		return nil, exitErrorResult
	default:
		e.logf("no answer from the server: %v", err)
		return nil, exitNoAnswer
	}
}

// When exec reads the client's position in the queue, and how often it
// repeats a position that has not changed.
const (
	positionFirst  = time.Second
	positionEvery  = 5 * time.Second
	positionRepeat = 30 * time.Second
)

// watchPosition prints the client's position in the lock's queue on standard
// error while the acquire waits, when it changes (and every positionRepeat
// if not). The server answers a waiting acquire only at the end of its wait,
// and the client may not ask again meanwhile (client busy), so the position
// comes from status, read every positionEvery: rarely enough not to weigh on
// the server or on a principal's request rate. The returned stop returns
// once nothing more will be printed.
func (e *execution) watchPosition() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last int64
		var printed time.Time
		timer := time.NewTimer(positionFirst)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			timer.Reset(positionEvery)
			qctx, qcancel := context.WithTimeout(ctx, positionEvery)
			st, err := e.c.Status(qctx, e.opts.Client)
			qcancel()
			var ce *client.Error
			switch {
			case errors.As(err, &ce) && ce.Status >= 400 && ce.Status < 500 && ce.Status != http.StatusTooManyRequests:
				return // refused (a principal without status, say): asking again would not help
			case err != nil, ctx.Err() != nil, st.Waiting == nil, st.Waiting.Lock != e.lock:
				continue
			}
			if p := st.Waiting.Position; p != last || time.Since(printed) >= positionRepeat {
				e.logf("waiting for %q: position %d", e.lock, p)
				last, printed = p, time.Now()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// runCommand runs the command while lease is kept and returns its exit
// status, or exitLost when the lease was lost meanwhile.
func (e *execution) runCommand(lease *client.Lease, sigs <-chan os.Signal) int {
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Env = append(withoutEnv(os.Environ(), predecessorEnv),
		"LEASEKEEPER_LOCK="+e.lock,
		"LEASEKEEPER_CLIENT="+e.opts.Client,
		"LEASEKEEPER_TOKEN="+strconv.FormatInt(lease.Token(), 10),
		"LEASEKEEPER_SERVER="+e.c.BaseURL(),
	)
	if e.caFile != "" {
		cmd.Env = append(cmd.Env, caFileEnv+"="+e.caFile)
	}
	if worst := lk.WorstEnding(lease.Predecessors()); worst != "" {
		cmd.Env = append(cmd.Env, predecessorEnv+"="+string(worst))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	ownProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		e.logf("starting the command: %v", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lostCh := lease.Lost()
	var kill <-chan time.Time
	var werr error
wait:
	for {
		select {
		case werr = <-exited:
			break wait
		case <-lostCh:
			lostCh = nil
			e.logf("the lease on %q was lost (%v): sending SIGTERM to the command", e.lock, lease.Err())
			signalGroup(cmd, syscall.SIGTERM)
			kill = time.After(e.grace)
		case <-kill:
			e.logf("the command outlived the %v grace: sending SIGKILL", e.grace)
			signalGroup(cmd, syscall.SIGKILL)
		case sig := <-sigs:
			signalGroup(cmd, sig)
		}
	}
	switch {
	case lostCh == nil:
		e.logf("the command ended: %v", describeExit(werr))
		return exitLost
	case lease.Err() != nil:
		// Lost as the command ended: it may have worked without the lock
		// for a while.
		e.logf("the lease on %q was lost while the command ran (%v); the command ended: %v", e.lock, lease.Err(), describeExit(werr))
		return exitLost
	}
	return commandStatus(cmd.ProcessState)
}

// commandStatus is a finished command's status as a shell reports it: its exit
// status, or 128+N when signal N ended it.
func commandStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 1
}

// predecessorEnv tells the command how the worst of its grant's
// predecessors ended (lk.WorstEnding); an exec run inside another's
// command must not pass on the outer one's.
const predecessorEnv = "LEASEKEEPER_PREDECESSOR_ENDED"

// withoutEnv returns env without the variable name.
func withoutEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
