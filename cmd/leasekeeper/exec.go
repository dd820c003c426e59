package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
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
	var sharedLocks []string
	cmd := &cobra.Command{
		Use:   "exec LOCK [LOCK...] --client ID --ttl N [--shared] [--shared-lock LOCK]... [--wait SECONDS] [--grace SECONDS] -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock, or several, like flock(1) for the fleet",
		Long: `exec acquires LOCK for --client (waiting up to --wait seconds), runs COMMAND
while it keeps the lease alive, renewing it about every third of --ttl, and
releases the lock when COMMAND exits. COMMAND's standard input, output and
error are exec's own; its environment has, besides exec's:

  LEASEKEEPER_LOCK     the lock
  LEASEKEEPER_CLIENT   the client
  LEASEKEEPER_TOKEN    the lease's fencing token, for the fenced store
                       and for 'leasekeeper fence sql'
  LEASEKEEPER_LOCKS    the locks, as a JSON array of strings
  LEASEKEEPER_TOKENS   their tokens, a JSON array in the same order
  LEASEKEEPER_SERVICE_ID
                       the service's identity (GET /v1/health's service_id),
                       the key of 'leasekeeper fence sql''s check; absent
                       when the server tells none
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
server answers or --wait plus --ttl has passed, and does not run COMMAND. A
server that stops gracefully (SIGTERM) during the wait says so, and exec
waits on for what is left of --wait, on whichever server then answers at
its URL (this one restarted, or another behind it).

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

Messages about all of these go to standard error.

Several locks (exec A B C -- COMMAND; the -- is then required) are taken in
one canonical order, by name byte-wise, whatever the order given, within
one --wait for them all: jobs that all take their locks this way never
deadlock. They are renewed together and released together. --shared makes
every lock shared; --shared-lock LOCK (repeated) makes only those shared.
LEASEKEEPER_LOCKS and LEASEKEEPER_TOKENS list them in canonical order, and
LEASEKEEPER_LOCK and LEASEKEEPER_TOKEN are set only with one lock. A
failure part-way (the wait ran out, a lock taken was lost during the wait,
or a client that takes its locks in another order made this one a deadlock
victim: 76) releases the locks taken and names the lock that failed; a
lease of the set lost while COMMAND runs is 77.`,
		Args: func(cmd *cobra.Command, args []string) error {
			// Without --, the first argument is the lock and the rest the
			// command (exec LOCK CMD...): several locks need the --.
			dash := cmd.ArgsLenAtDash()
			if (dash == -1 && len(args) >= 2) || (dash >= 1 && len(args) > dash) {
				return nil
			}
			return usageError{fmt.Errorf("exec takes LOCK (or several), then -- and the command to run")}
		},
	}
	options := acquireFlags(cmd, "the lease's length in seconds (required); it is renewed every third",
		"seconds to wait for the lock while queued")
	cmd.Flags().Int64Var(&grace, "grace", 10, "seconds between SIGTERM and SIGKILL when the lease is lost")
	cmd.Flags().StringArrayVar(&sharedLocks, "shared-lock", nil, "of several locks, take this one shared (repeat for more)")
	return clientCmd(cmd, -1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		opts, err := options(cmd)
		if err != nil {
			return err
		}
		g, err := seconds("grace", grace)
		if err != nil || g < 0 {
			return usageError{fmt.Errorf("--grace must be a number of seconds >= 0")}
		}
		nlocks := 1
		if dash := cmd.ArgsLenAtDash(); dash > 1 {
			nlocks = dash
		}
		locks, err := execLocks(args[:nlocks], opts.Shared, sharedLocks)
		if err != nil {
			return err
		}
		opts.Shared = locks[0].Shared
		e := &execution{
			c: c, lock: locks[0].Lock, argv: args[nlocks:], opts: opts, grace: g, caFile: commandCAFile(cmd, c),
			stdin: cmd.InOrStdin(), stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(),
		}
		if len(locks) > 1 {
			e.locks = locks
		}
		code := e.run()
		if code != 0 {
			return exitStatus{code: code}
		}
		return nil
	})
}

// execLocks are exec's locks in canonical order, with their modes: all
// shared with --shared, those of --shared-lock shared otherwise.
func execLocks(names []string, allShared bool, sharedLocks []string) ([]client.LockSpec, error) {
	specs := make([]client.LockSpec, len(names))
	for i, n := range names {
		specs[i] = client.LockSpec{Lock: n, Shared: allShared || slices.Contains(sharedLocks, n)}
	}
	for _, s := range sharedLocks {
		if !slices.Contains(names, s) {
			return nil, usageError{fmt.Errorf("--shared-lock %q is not one of the locks", s)}
		}
	}
	specs = client.CanonicalOrder(specs)
	for i := 1; i < len(specs); i++ {
		if specs[i].Lock == specs[i-1].Lock {
			return nil, usageError{fmt.Errorf("lock %q is given twice", specs[i].Lock)}
		}
	}
	return specs, nil
}

// execution is one run of exec.
type execution struct {
	c      *client.Client
	lock   string            // the lock; with several, the first in canonical order
	locks  []client.LockSpec // several locks, in canonical order; nil for one
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

// held is what exec holds: one *client.Lease, or a *client.LeaseSet.
type held interface {
	Lost() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// names is the lock, or the locks, for a message.
func (e *execution) names() string {
	if e.locks == nil {
		return strconv.Quote(e.lock)
	}
	q := make([]string, len(e.locks))
	for i, l := range e.locks {
		q[i] = strconv.Quote(l.Lock)
	}
	return strings.Join(q, ", ")
}

// run acquires, runs the command under the lease and releases; it returns
// the exit status (see the command's help).
func (e *execution) run() int {
	// exec answers signals itself, from the start: during the wait they
	// withdraw the request, while the command runs they are passed on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)

	h, leases, code := e.acquire(sigs)
	if h == nil {
		return code
	}
	code = e.runCommand(h, leases, sigs)
	lost := h.Err() != nil // before Release, which ends the lease too
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := h.Release(ctx)
	switch {
	case err == nil, lost:
	case errors.Is(err, client.ErrNotHolder):
		// The lease ended before the command did, unnoticed: exec (and
		// its keep-alive) stalled with it past the lease (a SIGSTOP, a
		// paused machine), and the command may have worked without
		// the lock.
		e.logf("the lease on %s had ended before the command did (released: %v)", e.names(), err)
		return exitLost
	default:
		e.logf("releasing %s: %v (the lease lapses at %s)", e.names(), err, leases[0].ExpiresAt().Format(time.RFC3339))
	}
	return code
}

// acquire takes the lock (or the locks), or returns the exit status saying
// why not.
func (e *execution) acquire(sigs <-chan os.Signal) (held, []*client.Lease, int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		lease  held
		leases []*client.Lease
		err    error
	}
	done := make(chan result, 1)
	go func() {
		if e.locks != nil {
			opts := e.opts
			opts.Shared = false
			set, err := e.c.AcquireAll(ctx, e.locks, opts)
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{set, set.Leases(), nil}
			return
		}
		l, err := e.c.Acquire(ctx, e.lock, e.opts)
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{l, []*client.Lease{l}, nil}
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
			e.logf("interrupted again by %v while withdrawing the request: %s may stay queued for %s until released (leasekeeper release LOCK --client %s)",
				again, e.opts.Client, e.names(), e.opts.Client)
			return nil, nil, 128 + signalNumber(again)
		}
		if r.lease != nil {
			rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
			r.lease.Release(rctx)
			rcancel()
		}
		var unknown *client.UnknownOutcomeError
		if errors.As(r.err, &unknown) && unknown.WithdrawErr != nil {
			e.logf("interrupted by %v while acquiring %s: %v", sig, e.names(), unknown)
		} else {
			e.logf("interrupted by %v while acquiring %s", sig, e.names())
		}
		return nil, nil, 128 + signalNumber(sig)
	}
	// With several locks, the messages name the one that failed; the
	// others were released.
	lock, err := e.lock, r.err
	var part *client.AcquireAllError
	if errors.As(err, &part) {
		lock, err = part.Lock, part.Err
		defer e.logf("the locks already taken were released")
		if part.Lost {
			e.logf("the lease on %q was lost while a later lock was awaited: %v", lock, err)
			return nil, nil, exitLost
		}
	}
	var res *client.Error
	var unknown *client.UnknownOutcomeError
	var queued *client.QueuedError
	switch {
	case err == nil:
		return r.lease, r.leases, 0
	case errors.As(err, &unknown) && unknown.WithdrawErr == nil:
		// The server died or failed during the acquire, and then
		// confirmed the withdraw: not obtained, as if the wait had run out.
		e.logf("%q not obtained: %v", lock, err)
		return nil, nil, exitQueued
	case errors.As(err, &unknown):
		e.logf("no answer from the server: %v", err)
		return nil, nil, exitNoAnswer
	case errors.As(err, &queued) && queued.WithdrawErr != nil:
		// Still queued, and the withdraw was never confirmed: the client
		// may stay queued, which 75 would deny.
		e.logf("%q not obtained, and the request may still be queued: %v", lock, err)
		return nil, nil, exitNoAnswer
	case errors.Is(err, client.ErrQueued):
		e.logf("%q not obtained: %v when the wait ran out", lock, err)
		return nil, nil, exitQueued
	case errors.Is(err, client.ErrDeadlock):
		e.logf("%q not obtained: %v", lock, err)
		return nil, nil, exitDeadlock
	case errors.Is(err, client.ErrWithdrawn), errors.As(err, &res):
		e.logf("%q not obtained: %v", lock, err)
		return nil, nil, exitErrorResult
	default:
		e.logf("no answer from the server: %v", err)
		return nil, nil, exitNoAnswer
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
			case err != nil, ctx.Err() != nil, st.Waiting == nil, !e.has(st.Waiting.Lock):
				continue
			}
			if p := st.Waiting.Position; p != last || time.Since(printed) >= positionRepeat {
				e.logf("waiting for %q: position %d", st.Waiting.Lock, p)
				last, printed = p, time.Now()
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// has reports whether lock is one of exec's.
func (e *execution) has(lock string) bool {
	if e.locks == nil {
		return lock == e.lock
	}
	return slices.ContainsFunc(e.locks, func(l client.LockSpec) bool { return l.Lock == lock })
}

// commandEnv is the command's environment: exec's own, less what an outer
// exec set, with the locks, their tokens and the service's identity.
func (e *execution) commandEnv(leases []*client.Lease) []string {
	env := os.Environ()
	for _, name := range []string{predecessorEnv, "LEASEKEEPER_LOCK", "LEASEKEEPER_TOKEN", locksEnv, tokensEnv, serviceIDEnv} {
		env = withoutEnv(env, name)
	}
	names := make([]string, len(leases))
	tokens := make([]int64, len(leases))
	var preds []lk.Predecessor
	for i, l := range leases {
		names[i], tokens[i] = l.Lock(), l.Token()
		preds = append(preds, l.Predecessors()...)
	}
	locksJSON, _ := json.Marshal(names)
	tokensJSON, _ := json.Marshal(tokens)
	env = append(env,
		"LEASEKEEPER_CLIENT="+e.opts.Client,
		"LEASEKEEPER_SERVER="+e.c.BaseURL(),
		locksEnv+"="+string(locksJSON),
		tokensEnv+"="+string(tokensJSON),
	)
	if len(leases) == 1 {
		env = append(env, "LEASEKEEPER_LOCK="+e.lock, "LEASEKEEPER_TOKEN="+strconv.FormatInt(leases[0].Token(), 10))
	}
	// The identity is read once the locks are held: the server answered a
	// moment ago. One that does not tell it (an older server) leaves it out.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	h, err := e.c.Health(ctx)
	cancel()
	switch {
	case err != nil:
		e.logf("reading the server's identity: %v (%s is not set)", err, serviceIDEnv)
	case h.ServiceID != "":
		env = append(env, serviceIDEnv+"="+h.ServiceID)
	}
	if e.caFile != "" {
		env = append(env, caFileEnv+"="+e.caFile)
	}
	if worst := lk.WorstEnding(preds); worst != "" {
		env = append(env, predecessorEnv+"="+string(worst))
	}
	return env
}

// runCommand runs the command while the lease (or the set) is kept and
// returns its exit status, or exitLost when a lease was lost meanwhile.
func (e *execution) runCommand(lease held, leases []*client.Lease, sigs <-chan os.Signal) int {
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Env = e.commandEnv(leases)
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
			e.logf("the lease on %s was lost (%v): sending SIGTERM to the command", e.names(), lease.Err())
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
		e.logf("the lease on %s was lost while the command ran (%v); the command ended: %v", e.names(), lease.Err(), describeExit(werr))
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
