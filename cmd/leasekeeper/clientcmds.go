package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// clientCommands are the commands that talk to a running server
// (acquire, renew, release, revoke, inspect, status, locks, history, write,
// read, exec, unfence, watch).
func clientCommands() []*cobra.Command {
	return []*cobra.Command{
		newAcquireCmd(), newRenewCmd(), newReleaseCmd(), newRevokeCmd(), newInspectCmd(), newStatusCmd(),
		newLocksCmd(), newHistoryCmd(), newWriteCmd(), newReadCmd(), newExecCmd(), newUnfenceCmd(), newWatchCmd(),
		newDeleteCmd(), newStoreCmd(),
	}
}

// The exit statuses of the client commands (docs/cli.md); 0 and 2 (usage)
// are as for every command.
const (
	exitErrorResult = 1  // the server answered with an error result
	exitNoAnswer    = 3  // the server could not be reached, or did not answer with the API's JSON
	exitQueued      = 75 // acquire: still queued when the wait ran out (EX_TEMPFAIL)
	exitDeadlock    = 76 // acquire: aborted as a deadlock victim
	exitLost        = 77 // exec: the lease was lost while the command ran
)

const (
	serverEnv     = "LEASEKEEPER_SERVER"
	defaultServer = "http://127.0.0.1:7070"
	authTokenEnv  = "LEASEKEEPER_AUTH_TOKEN"
	caFileEnv     = "LEASEKEEPER_CA_FILE"
)

// exitStatus asks for an exit status that main does not give (it exits 1 on
// an error and 2 on a usageError); err, when set, is printed first.
type exitStatus struct {
	code int
	err  error
}

func (e exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// clientCmd fills in what every client command shares: usage errors exit 2
// (cobra's own argument and flag errors included), an exitStatus exits with
// its code, --server names the server, --auth-token is the bearer token and
// --ca-file the certificate authorities trusted for https.
func clientCmd(cmd *cobra.Command, nargs int, run func(cmd *cobra.Command, args []string, c *client.Client) error) *cobra.Command {
	var server, authToken, caFile string
	cmd.Flags().Bool("pretty", false, "indent the JSON answer")
	cmd.Flags().StringVar(&server, "server", "", "the server's URL (default $"+serverEnv+", else "+defaultServer+")")
	cmd.Flags().StringVar(&authToken, "auth-token", "", "the bearer token for a server with an auth file (default $"+authTokenEnv+"; the environment keeps it out of ps)")
	cmd.Flags().StringVar(&caFile, "ca-file", "", "PEM file of the certificate authorities to trust for an https server, instead of the system's (default $"+caFileEnv+")")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	if cmd.Args == nil {
		cmd.Args = func(_ *cobra.Command, args []string) error {
			if len(args) != nargs {
				return usageError{fmt.Errorf("%s takes %d argument(s), got %d", cmd.Name(), nargs, len(args))}
			}
			return nil
		}
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := newClient(server, authToken, caFile)
		if err != nil {
			return err
		}
		err = run(cmd, args, c)
		var st exitStatus
		if errors.As(err, &st) {
			if st.err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "leasekeeper:", st.err)
			}
			os.Exit(st.code)
		}
		return err
	}
	return cmd
}

// newClient is the client of a command: the server of serverURL, the bearer
// token of --auth-token (else $LEASEKEEPER_AUTH_TOKEN), and with --ca-file
// (else $LEASEKEEPER_CA_FILE) only the certificate authorities in that file
// trusted. Never put the token in an error: they are printed.
func newClient(server, authToken, caFile string) (*client.Client, error) {
	fromEnv := caFile == ""
	if fromEnv {
		caFile = os.Getenv(caFileEnv)
	}
	u := serverURL(server, caFile != "")
	var opts []client.Option
	if authToken == "" {
		authToken = os.Getenv(authTokenEnv)
	}
	if authToken != "" {
		opts = append(opts, client.WithBearerToken(authToken))
	}
	if caFile != "" && fromEnv && !strings.HasPrefix(u, "https://") {
		// The environment may be set for the fleet's https servers while
		// this command names a plain one: nothing to verify.
		caFile = ""
	}
	if caFile != "" {
		if !strings.HasPrefix(u, "https://") {
			return nil, usageError{fmt.Errorf("--ca-file is for an https:// server, not %s", u)}
		}
		cfg, err := client.LoadCAFile(caFile)
		if err != nil {
			return nil, usageError{err}
		}
		opts = append(opts, client.WithTLSConfig(cfg))
	}
	return client.New(u, opts...), nil
}

// commandCAFile is the CA file that newClient made c trust, as an absolute
// path, for a command's environment: "" for none.
func commandCAFile(cmd *cobra.Command, c *client.Client) string {
	name, _ := cmd.Flags().GetString("ca-file")
	if name == "" {
		name = os.Getenv(caFileEnv)
	}
	if name == "" || !strings.HasPrefix(c.BaseURL(), "https://") {
		return ""
	}
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	return name
}

// serverURL is --server, else $LEASEKEEPER_SERVER, else the default; a bare
// host:port gets http://, or https:// when tls (--ca-file) is asked for.
func serverURL(flag string, tls bool) string {
	u := flag
	if u == "" {
		u = os.Getenv(serverEnv)
	}
	if u == "" {
		u = defaultServer
	}
	if !strings.Contains(u, "://") {
		if tls {
			u = "https://" + u
		} else {
			u = "http://" + u
		}
	}
	return u
}

// required refuses a command whose flags lack one of names.
func required(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if !cmd.Flags().Changed(n) {
			return usageError{fmt.Errorf("%s needs --%s", cmd.Name(), n)}
		}
	}
	return nil
}

// seconds turns a flag's whole seconds into a Duration. The server judges the
// range; only what a Duration cannot hold is refused here.
func seconds(flag string, n int64) (time.Duration, error) {
	if n > math.MaxInt64/int64(time.Second) || n < math.MinInt64/int64(time.Second) {
		return 0, usageError{fmt.Errorf("--%s %d is out of range", flag, n)}
	}
	return time.Duration(n) * time.Second, nil
}

// printAnswer prints an operation's answer on stdout, the API's JSON object
// on one line (indented with --pretty): the typed result, or the error object
// of an error answer, which is also returned (exit status 1). An operation
// with no answer exits 3.
func printAnswer(cmd *cobra.Command, res any, err error) error {
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Status != 0 && e.Code != "":
		printJSON(cmd, lk.Errorf(e.Code, e.Message))
		return err
	case errors.As(err, &e) && e.Status == 0:
		return usageError{err} // refused before it was sent
	case err != nil:
		return exitStatus{exitNoAnswer, fmt.Errorf("no answer from the server: %w", err)}
	}
	printJSON(cmd, res)
	return nil
}

// printJSON writes v as one line of JSON, or indented with --pretty.
func printJSON(cmd *cobra.Command, v any) {
	var b []byte
	if pretty, _ := cmd.Flags().GetBool("pretty"); pretty {
		b, _ = json.MarshalIndent(v, "", "  ")
	} else {
		b, _ = json.Marshal(v)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
}

// acquireStatus maps an acquire's answer to its exit status.
func acquireStatus(res lk.AcquireResult) error {
	switch res.Outcome {
	case lk.Granted:
		return nil
	case lk.Queued:
		return exitStatus{exitQueued, &client.QueuedError{Position: res.Position, Victims: res.Victims}}
	case lk.Deadlock:
		return exitStatus{exitDeadlock, &client.DeadlockError{Victims: res.Victims}}
	}
	return exitStatus{exitErrorResult, client.ErrWithdrawn}
}

func newAcquireCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acquire LOCK --client ID --ttl N [--shared] [--wait SECONDS]",
		Short: "Acquire a lock for a client, waiting up to --wait seconds",
		Long: `acquire asks the server for LOCK on behalf of --client with a lease of --ttl
seconds, and prints the answer: {"outcome": "granted", "token": 7,
"granted_at": ..., "expires_at": ...}, {"outcome": "queued", "position": 2}
or {"outcome": "deadlock", "victims": [...]}.

Nothing renews the lease: renew it with 'leasekeeper renew', or use
'leasekeeper exec' to hold a lock while a command runs. A client that is still
queued stays queued (release withdraws it).

Exit status: 0 granted; 75 still queued (when the wait ran out, or at once
without --wait); 76 aborted as a deadlock victim; 1 an error result, or the
request withdrawn by a release from elsewhere during the wait; 2 usage;
3 no answer from the server.`,
	}
	options := acquireFlags(cmd, "the lease's length in seconds (required)",
		"seconds the server may hold the request while the client is queued")
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		opts, err := options(cmd)
		if err != nil {
			return err
		}
		res, err := c.AcquireOnce(cmd.Context(), args[0], opts)
		if err := printAnswer(cmd, res, err); err != nil {
			return err
		}
		return acquireStatus(res)
	})
}

// acquireFlags adds the flags that acquire and exec share (--client, --ttl,
// --shared, --wait) and returns what turns them, once parsed, into the
// request's options: --client and --ttl are required.
func acquireFlags(cmd *cobra.Command, ttlHelp, waitHelp string) func(*cobra.Command) (client.AcquireOptions, error) {
	var opts client.AcquireOptions
	var ttl, wait int64
	cmd.Flags().StringVar(&opts.Client, "client", "", "the client acquiring (required)")
	cmd.Flags().Int64Var(&ttl, "ttl", 0, ttlHelp)
	cmd.Flags().BoolVar(&opts.Shared, "shared", false, "a shared lease instead of an exclusive one")
	cmd.Flags().Int64Var(&wait, "wait", 0, waitHelp)
	return func(cmd *cobra.Command) (client.AcquireOptions, error) {
		var err error
		if err = required(cmd, "client", "ttl"); err != nil {
			return opts, err
		}
		if opts.TTL, err = seconds("ttl", ttl); err != nil {
			return opts, err
		}
		opts.Wait, err = seconds("wait", wait)
		return opts, err
	}
}

func newRenewCmd() *cobra.Command {
	var clientID string
	var ttl int64
	cmd := &cobra.Command{
		Use:   "renew LOCK --client ID --ttl N",
		Short: "Renew a client's lease for --ttl seconds from now",
		Long: `renew sets the client's lease on LOCK to end --ttl seconds from now (it may
shorten it) and prints {"outcome": "renewed", "token": ..., "granted_at": ...,
"expires_at": ...}.

Exit status: 0 renewed; 1 an error answer ({"error": "not_holder", ...} when
the client holds no live lease on LOCK); 2 usage; 3 no answer from the server.`,
	}
	cmd.Flags().StringVar(&clientID, "client", "", "the client holding the lease (required)")
	cmd.Flags().Int64Var(&ttl, "ttl", 0, "the lease's new length in seconds from now (required)")
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "client", "ttl"); err != nil {
			return err
		}
		d, err := seconds("ttl", ttl)
		if err != nil {
			return err
		}
		res, err := c.Renew(cmd.Context(), clientID, args[0], d)
		return printAnswer(cmd, res, err)
	})
}

func newReleaseCmd() *cobra.Command {
	var clientID string
	cmd := &cobra.Command{
		Use:   "release LOCK --client ID",
		Short: "Release a client's lease, or withdraw its queued request",
		Long: `release ends the client's lease on LOCK ({"outcome": "released"}), or takes
its request out of LOCK's queue ({"outcome": "withdrawn"}).

Exit status: 0 released or withdrawn; 1 an error answer ("not_holder" when the
client neither holds nor awaits LOCK); 2 usage; 3 no answer from the server.`,
	}
	cmd.Flags().StringVar(&clientID, "client", "", "the client releasing (required)")
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "client"); err != nil {
			return err
		}
		res, err := c.Release(cmd.Context(), clientID, args[0])
		return printAnswer(cmd, res, err)
	})
}

func newRevokeCmd() *cobra.Command {
	var clientID string
	cmd := &cobra.Command{
		Use:   "revoke LOCK --client ID",
		Short: "End a client's lease now (admins only on a server with an auth file)",
		Long: `revoke ends --client's lease on LOCK now, as the holder's release would, and
prints {"outcome": "revoked"}. The lock is handed over at this instant to whoever waits,
and the next grant's higher fencing token keeps the revoked holder out of the
fenced store; the holder learns it at its next renew ("not_holder").
With an auth file on the server, only an admin's token may revoke.

Exit status: 0 revoked; 1 an error answer ("not_holder" when the client holds
no live lease on LOCK, "forbidden" for a token that is not an admin's,
"unauthenticated" without a valid token); 2 usage; 3 no answer from the
server.`,
	}
	cmd.Flags().StringVar(&clientID, "client", "", "the client whose lease ends (required)")
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "client"); err != nil {
			return err
		}
		res, err := c.Revoke(cmd.Context(), clientID, args[0])
		return printAnswer(cmd, res, err)
	})
}

func newInspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect LOCK",
		Short: "Print a lock's holders and queue",
		Long: `inspect prints {"lock": LOCK, "holders": [{"client", "mode", "token",
"expires_at"}, ...], "queue": [{"client", "mode", "position"}, ...]}: holders
by token, the queue oldest first, position 1 next in line.

Exit status: 0 answered; 1 an error result; 2 usage; 3 no answer from the server.`,
	}
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		res, err := c.Inspect(cmd.Context(), args[0])
		return printAnswer(cmd, res, err)
	})
}

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status CLIENT",
		Short: "Print what a client holds and waits for",
		Long: `status prints {"client": CLIENT, "age": n or null, "holds": [{"lock", "mode",
"token", "expires_at"}, ...], "waiting": {"lock", "position"} or null,
"next": null}; a client the server does not know has age null. It reads the
server's pages of 100 holds until the last and prints every hold in one
object; age and waiting are the first page's.

Exit status: 0 answered; 1 an error result; 2 usage; 3 no answer from the server.`,
	}
	return clientCmd(cmd, 1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		res, err := c.Status(cmd.Context(), args[0])
		for err == nil && res.Next != nil {
			var page lk.StatusResult
			page, err = c.StatusPage(cmd.Context(), args[0], *res.Next, 0)
			res.Holds, res.Next = append(res.Holds, page.Holds...), page.Next
		}
		if err != nil {
			return printAnswer(cmd, nil, err)
		}
		return printAnswer(cmd, res, nil)
	})
}

func newLocksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "List the locks that have holders or waiters",
		Long: `locks prints one line per lock that has holders or waiters, by name:
{"lock": name, "holders": [{"client", "mode", "token", "expires_at"}, ...],
"waiting": n}. It reads the server's pages of 100 until the last; --prefix
lists only the locks whose names start with it.

Exit status: 0 answered; 1 an error result; 2 usage; 3 no answer from the server.`,
	}
	var prefix string
	cmd.Flags().StringVar(&prefix, "prefix", "", "only locks whose names start with this")
	return clientCmd(cmd, 0, func(cmd *cobra.Command, args []string, c *client.Client) error {
		for l, err := range c.AllLocks(cmd.Context(), prefix) {
			if err != nil {
				return printAnswer(cmd, nil, err)
			}
			printJSON(cmd, l)
		}
		return nil
	})
}

func newWriteCmd() *cobra.Command {
	var token int64
	cmd := &cobra.Command{
		Use:   "write LOCK KEY VALUE --token N",
		Short: "Write a value to the fenced store with a fencing token",
		Long: `write stores VALUE under (LOCK, KEY) in the fenced store if --token is at
least the highest token the store accepted for LOCK, and prints
{"outcome": "ok"}.

Exit status: 0 written; 1 an error answer ("stale_token" when a higher token
was accepted, "token_not_granted" when --token was never granted for LOCK on
a server with --strict-fencing); 2 usage; 3 no answer from the server.`,
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the fencing token of the writer's lease (required)")
	return clientCmd(cmd, 3, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "token"); err != nil {
			return err
		}
		res, err := c.Write(cmd.Context(), args[0], args[1], args[2], token)
		return printAnswer(cmd, res, err)
	})
}

func newReadCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "read LOCK KEY",
		Short: "Read a value from the fenced store",
		Long: `read prints {"value": ..., "token": n}: the last value the fenced store
accepted for (LOCK, KEY) and the token of the write that stored it, or
{"value": null} when it has none.

Exit status: 0 answered (null included); 1 an error result; 2 usage; 3 no
answer from the server.`,
	}
	return clientCmd(cmd, 2, func(cmd *cobra.Command, args []string, c *client.Client) error {
		res, err := c.Read(cmd.Context(), args[0], args[1])
		return printAnswer(cmd, res, err)
	})
}
