package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/spf13/cobra"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/fence"
)

// exitStale is fence sql's status when the check refused the token: a
// newer token has written to the resource (docs/cli.md).
const exitStale = 78

// The environment exec gives its command besides LEASEKEEPER_LOCK and
// LEASEKEEPER_TOKEN (fence.EnvLock, fence.EnvToken).
const (
	serviceIDEnv = fence.EnvServiceID
	locksEnv     = "LEASEKEEPER_LOCKS"
	tokensEnv    = "LEASEKEEPER_TOKENS"
	clientEnv    = "LEASEKEEPER_CLIENT"
)

func newFenceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fence",
		Short: "Check fencing tokens in the job's own database (PostgreSQL, SQLite, MySQL/MariaDB)",
		Long: `fence brings the fencing token's check to the database a job writes to
(docs/fencing.md): 'fence install' creates the table that keeps, per fenced
resource, the highest token that wrote; 'fence sql' runs SQL in one
transaction whose first statement is the check, so that a job that stalled
past its lease cannot overwrite its successor's rows.

--db tells the dialects apart by its form:
  postgres://... or postgresql://...   PostgreSQL (a libpq URL)
  mysql://DSN                          MySQL or MariaDB: DSN is go-sql-driver/mysql's,
                                       user:password@tcp(host:3306)/database
  anything else                        a SQLite file (a name or a file: URI)`,
		SilenceUsage: true,
	}
	cmd.AddCommand(newFenceInstallCmd(), newFenceSQLCmd())
	return cmd
}

func newFenceInstallCmd() *cobra.Command {
	var dsn string
	var printSQL bool
	cmd := &cobra.Command{
		Use:   "install --db DSN",
		Short: "Create the fence table (leasekeeper_fence) if it does not exist",
		Long: `install creates the table leasekeeper_fence in the database of --db, if it does
not exist yet, and prints {"outcome":"ok","table":"leasekeeper_fence"}. With
--print it prints the SQL instead, for a migration of your own, and connects
to nothing (--db still picks the dialect).

Exit status: 0 done; 1 the database refused or could not be reached; 2 usage.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().StringVar(&dsn, "db", "", "the job's database (required): see 'leasekeeper fence --help' for its forms")
	cmd.Flags().BoolVar(&printSQL, "print", false, "print the SQL instead of running it")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := required(cmd, "db"); err != nil {
			return err
		}
		d, err := dialectOf(dsn)
		if err != nil {
			return err
		}
		if printSQL {
			fmt.Fprint(cmd.OutOrStdout(), fence.InstallSQL(d))
			return nil
		}
		db, err := openFenceDB(dsn, d, true)
		if err != nil {
			return err
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
		defer cancel()
		if err := fence.Install(ctx, db, d); err != nil {
			return err
		}
		printJSON(cmd, map[string]string{"outcome": "ok", "table": fence.Table})
		return nil
	}
	return cmd
}

// fenceSQLResult is what fence sql prints: committed, or stale (with Newer).
type fenceSQLResult struct {
	Outcome      string  `json:"outcome"`
	Lock         string  `json:"lock"`
	Resource     string  `json:"resource"`
	Token        int64   `json:"token"`
	Newer        int64   `json:"newer,omitempty"`
	RowsAffected []int64 `json:"rows_affected,omitempty"`
}

func newFenceSQLCmd() *cobra.Command {
	var (
		dsn, lock, resource, serviceID, clientID string
		token, lockWait                          int64
		noReport                                 bool
	)
	cmd := &cobra.Command{
		Use:   "sql --db DSN [--lock L --token T] [--resource R] [-- SQL...]",
		Short: "Run SQL in one transaction, with the fencing token's check first",
		Long: `sql runs the statements of its arguments after -- (each may hold several,
separated by ;), or of standard input without any, in one transaction of
the database of --db whose first statement is the check of the token
(docs/fencing.md). It commits only when the check and every statement
succeeded, and prints {"outcome":"committed", ..., "rows_affected": [...]}.
When a newer token has already written to the resource, nothing is written:
it prints {"outcome":"stale", ..., "newer": N} and exits 78.

The token: --lock and --token, else, inside 'leasekeeper exec', its
environment: LEASEKEEPER_LOCK and LEASEKEEPER_TOKEN, or with several locks
the token of --lock in LEASEKEEPER_LOCKS and LEASEKEEPER_TOKENS. The
service identity: --service-id, else $LEASEKEEPER_SERVICE_ID (exec sets
it), else the server's GET /v1/health. --resource defaults to the lock's
name.

Statements that control the transaction (BEGIN, START, COMMIT, END,
ROLLBACK, ABORT, SAVEPOINT, RELEASE, PREPARE TRANSACTION, XA) are refused
before anything runs, and on MySQL/MariaDB so are those that commit
implicitly (CREATE, ALTER, DROP, TRUNCATE, RENAME, LOCK, ...): the check
holds only until the transaction ends.

A refusal is reported to the server (POST /v1/stale), after the rollback,
when the client is known (--client, else $LEASEKEEPER_CLIENT), unless
--no-report; a report that fails only prints a warning.

Exit status: 0 committed; 78 stale: refused, nothing written; 1 the
database failed (rolled back); 2 usage, or a refused statement; 3 no
answer from the server when asking for its identity.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); len(args) > 0 && dash != 0 {
				return usageError{errors.New("fence sql takes its SQL after --, or on standard input")}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dsn, "db", "", "the job's database (required): see 'leasekeeper fence --help' for its forms")
	cmd.Flags().StringVar(&lock, "lock", "", "the lock the token was granted on (default $LEASEKEEPER_LOCK)")
	cmd.Flags().Int64Var(&token, "token", 0, "the fencing token (default $LEASEKEEPER_TOKEN)")
	cmd.Flags().StringVar(&resource, "resource", "", "what the statements write, the fence's row (default: the lock's name)")
	cmd.Flags().StringVar(&serviceID, "service-id", "", "the identity of the service that granted the token (default $LEASEKEEPER_SERVICE_ID, else the server's health)")
	cmd.Flags().StringVar(&clientID, "client", "", "the client holding the lock, for the stale report (default $LEASEKEEPER_CLIENT)")
	cmd.Flags().BoolVar(&noReport, "no-report", false, "do not report a stale refusal to the server")
	cmd.Flags().Int64Var(&lockWait, "lock-wait", 30, "seconds a statement may wait for a row or database lock (0: the database's own setting)")
	return clientCmd(cmd, -1, func(cmd *cobra.Command, args []string, c *client.Client) error {
		if err := required(cmd, "db"); err != nil {
			return err
		}
		d, err := dialectOf(dsn)
		if err != nil {
			return err
		}
		if lockWait < 0 || lockWait > 86400 {
			return usageError{errors.New("--lock-wait must be from 0 to 86400 seconds")}
		}
		tok, err := fenceToken(cmd, lock, token)
		if err != nil {
			return err
		}
		if resource == "" {
			resource = tok.Lock
		}
		text := strings.Join(args, ";\n")
		if len(args) == 0 {
			b, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading standard input: %w", err)
			}
			text = string(b)
		}
		stmts, err := splitSQL(text, d)
		if err != nil {
			return usageError{err}
		}
		if len(stmts) == 0 {
			return usageError{errors.New("no SQL to run")}
		}
		for _, s := range stmts {
			if err := refuseStatement(s, d); err != nil {
				return usageError{err}
			}
		}
		if serviceID == "" {
			serviceID = os.Getenv(serviceIDEnv)
		}
		if serviceID == "" {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
			h, err := c.Health(ctx)
			cancel()
			if err != nil {
				return exitStatus{exitNoAnswer, fmt.Errorf("asking %s for its identity: %w", c.BaseURL(), err)}
			}
			if h.ServiceID == "" {
				return exitStatus{exitNoAnswer, fmt.Errorf("%s tells no identity (service_id): give --service-id", c.BaseURL())}
			}
			serviceID = h.ServiceID
		}
		tok.Service = serviceID

		db, err := openFenceDB(dsn, d, false)
		if err != nil {
			return err
		}
		defer db.Close()
		res := fenceSQLResult{Lock: tok.Lock, Resource: resource, Token: tok.Token}
		err = runFenced(cmd.Context(), db, d, time.Duration(lockWait)*time.Second, tok, resource, stmts, &res.RowsAffected)
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			res.Outcome, res.Newer, res.RowsAffected = "stale", stale.Newer, nil
			printJSON(cmd, res)
			fmt.Fprintf(cmd.ErrOrStderr(), "leasekeeper: fence sql: token %d of lock %q is stale: %q was written with token %d: nothing was written\n",
				stale.Token, stale.Lock, stale.Resource, stale.Newer)
			if !noReport {
				reportStale(cmd, c, clientID, stale)
			}
			return exitStatus{code: exitStale}
		case err != nil:
			return err
		}
		res.Outcome = "committed"
		printJSON(cmd, res)
		return nil
	})
}

// fenceToken is the lock and token of --lock and --token, or of exec's
// environment.
func fenceToken(cmd *cobra.Command, lock string, token int64) (fence.Token, error) {
	if cmd.Flags().Changed("token") {
		if lock == "" {
			return fence.Token{}, usageError{errors.New("--token needs --lock")}
		}
		if token < 1 {
			return fence.Token{}, usageError{errors.New("--token must be 1 or more")}
		}
		return fence.Token{Lock: lock, Token: token}, nil
	}
	if raw := os.Getenv(locksEnv); raw != "" {
		var locks []string
		var tokens []int64
		if err := json.Unmarshal([]byte(raw), &locks); err != nil {
			return fence.Token{}, usageError{fmt.Errorf("$%s is not a JSON array of lock names: %v", locksEnv, err)}
		}
		if err := json.Unmarshal([]byte(os.Getenv(tokensEnv)), &tokens); err != nil || len(tokens) != len(locks) {
			return fence.Token{}, usageError{fmt.Errorf("$%s is not a JSON array of one token per lock of $%s", tokensEnv, locksEnv)}
		}
		if lock == "" && len(locks) > 1 {
			return fence.Token{}, usageError{fmt.Errorf("exec holds %d locks: name the one to check with --lock", len(locks))}
		}
		for i, l := range locks {
			if lock == "" || l == lock {
				return fence.Token{Lock: l, Token: tokens[i]}, nil
			}
		}
		return fence.Token{}, usageError{fmt.Errorf("--lock %q is not among exec's locks ($%s)", lock, locksEnv)}
	}
	envLock, envToken := os.Getenv(fence.EnvLock), os.Getenv(fence.EnvToken)
	if envLock == "" || envToken == "" || (lock != "" && lock != envLock) {
		return fence.Token{}, usageError{errors.New("fence sql needs --lock and --token, outside leasekeeper exec")}
	}
	n, err := strconv.ParseInt(envToken, 10, 64)
	if err != nil || n < 1 {
		return fence.Token{}, usageError{fmt.Errorf("$%s=%q is not a token", fence.EnvToken, envToken)}
	}
	return fence.Token{Lock: envLock, Token: n}, nil
}

// runFenced runs stmts in one transaction after the check, on a connection
// whose lock wait is bounded by wait (0: the database's setting), and
// records each statement's affected rows.
func runFenced(ctx context.Context, db *sql.DB, d fence.Dialect, wait time.Duration, tok fence.Token, resource string, stmts []string, rows *[]int64) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if wait > 0 {
		// Session settings: they bound the wait for a job that stalled
		// after its check and holds the row (docs/fencing.md).
		var q string
		switch d {
		case fence.Postgres:
			q = fmt.Sprintf("SET lock_timeout = %d", wait.Milliseconds())
		case fence.MySQL:
			q = fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", int64(wait.Seconds()))
		case fence.SQLite:
			q = fmt.Sprintf("PRAGMA busy_timeout = %d", wait.Milliseconds())
		}
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return fence.InTx(ctx, conn, d, tok, resource, func(tx *sql.Tx) error {
		*rows = (*rows)[:0]
		for i, s := range stmts {
			r, err := tx.ExecContext(ctx, s)
			if err != nil {
				return fmt.Errorf("statement %d: %w (rolled back: nothing was written)", i+1, err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				n = -1
			}
			*rows = append(*rows, n)
		}
		return nil
	})
}

// reportStale sends the refusal to the server, best effort.
func reportStale(cmd *cobra.Command, c *client.Client, clientID string, stale *fence.StaleError) {
	if clientID == "" {
		clientID = os.Getenv(clientEnv)
	}
	if clientID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.ReportStale(ctx, lk.StaleRequest{Client: clientID, Lock: stale.Lock, Token: stale.Token, Newer: stale.Newer, Resource: stale.Resource})
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "leasekeeper: fence sql: reporting the refusal to %s: %v\n", c.BaseURL(), err)
	}
}

// dialectOf tells --db's dialect by its form (newFenceCmd's help).
func dialectOf(dsn string) (fence.Dialect, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return fence.Postgres, nil
	case strings.HasPrefix(dsn, "mysql://"):
		return fence.MySQL, nil
	case strings.Contains(dsn, "@tcp(") || strings.Contains(dsn, "@unix("):
		// Else it would be taken for a SQLite file and created.
		return "", usageError{fmt.Errorf("--db %q looks like a MySQL DSN: write it mysql://%s", dsn, dsn)}
	case dsn == "":
		return "", usageError{errors.New("--db is empty")}
	}
	return fence.SQLite, nil
}

// openFenceDB opens dsn. A SQLite file is opened with BEGIN IMMEDIATE
// transactions, and created only by install.
func openFenceDB(dsn string, d fence.Dialect, create bool) (*sql.DB, error) {
	switch d {
	case fence.Postgres:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, usageError{fmt.Errorf("--db: %w", err)}
		}
		return stdlib.OpenDB(*cfg), nil
	case fence.MySQL:
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
		if err != nil {
			return nil, usageError{fmt.Errorf("--db: %w", err)}
		}
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, usageError{fmt.Errorf("--db: %w", err)}
		}
		return sql.OpenDB(conn), nil
	}
	uri := dsn
	if !strings.HasPrefix(uri, "file:") {
		uri = "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(dsn)
	}
	sep := "?"
	if strings.Contains(uri, "?") {
		sep = "&"
	}
	uri += sep + "_txlock=immediate"
	if !create {
		uri += "&mode=rw"
	}
	return sql.Open("sqlite", uri)
}
