package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/internal/bare"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/telemetry"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

func newServeCmd() *cobra.Command {
	var dbPath, listen, cpuProfile, auditLog string
	var sec *securityFlags
	var conn *connFlags
	var logFormat *string
	cmd := &cobra.Command{
		Use:   "serve [--db FILE|URL] [--listen ADDR]",
		Short: "Serve the lock service over HTTP on a durable SQLite file or PostgreSQL",
		Long: `serve runs the lock service: the HTTP API of docs/api.md under /v1, on a
SQLite file in WAL mode with synchronous=FULL, so that every acknowledged
grant, renew, release and store write survives a crash or a power loss.

With --db postgres://... it runs on a PostgreSQL database instead, which
several servers may share (docs/deployment.md); time is then the database's
clock, so that servers agree on it.

Time is the server's clock in whole Unix seconds, never running backwards;
leases are retired at their expiry by a timer, with no request needed.
SIGTERM or SIGINT stops it gracefully, within about 10 s whatever clients
do: no request is read any more, blocked acquires are answered with their
current state, requests already read finish, the database is closed.

Connections are capped (--max-connections) and time out (--idle-timeout,
--read-timeout, --write-timeout); a request refused before it is judged
closes its connection (docs/deployment.md).

It logs to standard error, JSON lines by default (--log-format text for
key=value lines), the audit log's lines among them unless --audit-log sends
those to a file (docs/observability.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return serve(cmd.Context(), cmd, dbPath, listen, auditLog, *logFormat, sec, conn)
		},
	}
	sec = addSecurityFlags(cmd)
	conn = addConnFlags(cmd)
	cmd.Flags().StringVar(&dbPath, "db", "leasekeeper.db", "SQLite file, or postgres:// URL, holding the lock state")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7070", "address to listen on (port 0 picks a free one)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a pprof CPU profile of the server's run to this file")
	cmd.Flags().StringVar(&auditLog, "audit-log", "", "append the audit log (JSON lines) to this file instead of standard error")
	logFormat = addLogFormatFlag(cmd)
	addQuotaFlags(cmd)
	addFencingFlag(cmd)
	addHistoryFlags(cmd)
	addEventsFlags(cmd)
	addReadyFileFlag(cmd)
	addMarkFlags(cmd)
	return cmd
}

// openAudit returns where the audit log goes: path (appended, created if
// missing) or, when path is empty, standard error.
func openAudit(cmd *cobra.Command, path string) (io.Writer, func() error, error) {
	if path == "" {
		return cmd.ErrOrStderr(), func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--audit-log: %w", err)}
	}
	return f, f.Close, nil
}

func serve(ctx context.Context, cmd *cobra.Command, dbPath, listen, auditLog, logFormat string, sf *securityFlags, cf *connFlags) error {
	log, auditFormat, err := newServeLog(cmd.ErrOrStderr(), logFormat)
	if err != nil {
		return err
	}
	if auditLog != "" {
		auditFormat = telemetry.JSON // a file of its own: read back at start (Recover)
	}
	sec, err := sf.setup(listen, log)
	if err != nil {
		return err
	}
	conns, err := cf.setup(log)
	if err != nil {
		return err
	}
	audit, closeAudit, err := openAudit(cmd, auditLog)
	if err != nil {
		return err
	}
	defer closeAudit()
	history, err := historyRetention(cmd)
	if err != nil {
		return err
	}
	events, err := eventsBuffer(cmd)
	if err != nil {
		return err
	}
	var eng *engine.Engine // the gauges read it at each scrape, once serving
	tel := telemetry.New(audit, func(ctx context.Context) (service.Gauges, error) { return eng.Gauges(ctx) },
		telemetry.Options{Principals: sec.Authorizer != nil, Format: auditFormat})
	// FULL: WAL with synchronous=NORMAL survives a killed process but may
	// lose the last commits on power loss; FULL syncs the WAL at every
	// commit, so an acknowledged operation is on disk.
	eng, err = engine.Open(ctx, dbPath, engine.Options{DB: repo.Options{Synchronous: "FULL", Warn: log.Warn},
		Rules:  service.Config{Quota: storeQuota(cmd), StrictFencing: strictFencing(cmd), History: history, Explain: !bare.Build},
		Logger: log, Observer: tel, EventsBuffer: events, Mark: markFile(cmd, dbPath), AcceptRollback: acceptRollback(cmd)})
	if err != nil {
		return err
	}
	ln, err := sec.listen(listen, conns.Listener)
	if err != nil {
		eng.Close()
		return err
	}
	srv := server.New(eng, server.Options{Logger: log, Authorizer: sec.Authorizer, Observer: tel, Metrics: tel.Handler(), MaxStreams: cf.maxStreams})
	tel.ConnectionsFrom(conns.Open, conns.Max())
	hs, httpLog := cf.httpServer(srv.Handler(), conns, log)
	log.Info("listening", "url", sec.scheme()+"://"+ln.Addr().String(), "database", repo.Redacted(dbPath))
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	removeReady, err := writeReadyFile(cmd, ln.Addr())
	if err != nil {
		hs.Close()
		eng.Close()
		return err
	}
	defer removeReady()
	// The same moment as --ready-file: listening, on an open database.
	if err := notifyServiceManager(fmt.Sprintf("READY=1\nSTATUS=listening on %s://%s", sec.scheme(), ln.Addr())); err != nil {
		log.Error("could not tell the service manager that serve is ready", "err", err)
	}
	select {
	case err = <-served:
	case <-ctx.Done():
		if err := notifyServiceManager("STOPPING=1"); err != nil {
			log.Warn("could not tell the service manager that serve is stopping", "err", err)
		}
		err = stopServing(log, hs, eng, conns)
	}
	cerr := eng.Close()
	// The counts of log lines held back, which a stop within a second of
	// them would lose.
	tel.Flush()
	sec.flush()
	httpLog.Flush()
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		err = cerr
	}
	return err
}
