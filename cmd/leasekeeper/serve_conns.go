package main

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// connFlags are serve's flags for its connections (docs/deployment.md,
// "Connections").
type connFlags struct {
	maxConns, maxStreams       int
	idle, readReq, writeAnswer time.Duration
}

func addConnFlags(cmd *cobra.Command) *connFlags {
	f := &connFlags{}
	cmd.Flags().IntVar(&f.maxConns, "max-connections", 0, "most connections open at once; beyond, new ones wait and idle ones are closed to make room (default 80% of the file limit)")
	cmd.Flags().IntVar(&f.maxStreams, "max-streams", server.DefaultMaxStreams, "most event streams (GET /v1/events) open at once; beyond, 429 rate_limited")
	cmd.Flags().DurationVar(&f.idle, "idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
	cmd.Flags().DurationVar(&f.readReq, "read-timeout", 30*time.Second, "time to read a whole request, body included (a blocked acquire's wait is not bounded by it)")
	cmd.Flags().DurationVar(&f.writeAnswer, "write-timeout", 30*time.Second, "time a client has to take each write of an answer (a wait before the answer is not bounded by it)")
	return f
}

// minFileLimit is the file limit below which serve warns at start.
const minFileLimit = 4096

// setup checks the flags and returns the connection guards, with the cap
// defaulting to 80 % of the file limit: the rest is for the database, the
// logs and what net/http and the runtime open.
func (f *connFlags) setup(log *slog.Logger) (*server.Conns, error) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--idle-timeout", f.idle}, {"--read-timeout", f.readReq}, {"--write-timeout", f.writeAnswer}} {
		if d.v <= 0 {
			return nil, usageError{fmt.Errorf("%s must be a positive duration, got %s", d.name, d.v)}
		}
	}
	if f.maxStreams < 1 {
		return nil, usageError{fmt.Errorf("--max-streams must be at least 1, got %d", f.maxStreams)}
	}
	if f.maxConns < 0 {
		return nil, usageError{fmt.Errorf("--max-connections must be at least 1 (0 for the default), got %d", f.maxConns)}
	}
	// Go raised the soft limit to the hard one as the process started: this
	// is the most files it may open.
	limit, known := fileLimit()
	max := f.maxConns
	if max == 0 && known {
		max = int(min(limit/10*8, 1<<30)) // RLIM_INFINITY is 1<<64-1
	}
	switch {
	case !known:
	case f.maxConns > 0 && uint64(f.maxConns) > limit/10*8:
		log.Warn("--max-connections is close to the file limit, or beyond: connections may take the files the database and the logs need, and accepting fail with \"too many open files\"",
			"max_connections", f.maxConns, "file_limit", limit)
	case limit < minFileLimit:
		log.Warn("the file limit is low: few connections may be open at once; raise the hard limit (ulimit -Hn, systemd's LimitNOFILE)",
			"file_limit", limit, "max_connections", max)
	}
	log.Info("connections", "max", max, "file_limit", limit, "idle_timeout", f.idle, "read_timeout", f.readReq, "write_timeout", f.writeAnswer)
	return server.NewConns(server.ConnOptions{Max: max, WriteTimeout: f.writeAnswer, HeaderTimeout: f.headerTimeout(), Logger: log}), nil
}

// headerTimeout bounds reading a request's line and headers, from its first
// byte (server.Conns) and from its fourth (net/http).
func (f *connFlags) headerTimeout() time.Duration { return min(10*time.Second, f.readReq) }

// httpServer is the http.Server of h with the flags' timeouts and the
// guards of conns, and the limiter of its log lines, for serve to flush at
// shutdown.
func (f *connFlags) httpServer(h http.Handler, conns *server.Conns, log *slog.Logger) (*http.Server, *server.LogLimiter) {
	// net/http logs a line per failed TLS handshake, which a client can
	// cause as fast as it connects.
	lim := server.NewLogLimiter(server.RefusalLogRate, server.RefusalLogBurst, func(n int) {
		log.Warn(fmt.Sprintf("suppressed %d lines of net/http", n), "suppressed", n)
	})
	hs := &http.Server{
		Handler:           h,
		ReadTimeout:       f.readReq,
		ReadHeaderTimeout: f.headerTimeout(),
		IdleTimeout:       f.idle,
		ErrorLog:          stdlog.New(&limitedLog{log: log, lim: lim}, "", 0),
	}
	conns.Configure(hs)
	return hs, lim
}

// limitedLog passes net/http's log lines to log at a bounded rate.
type limitedLog struct {
	log *slog.Logger
	lim *server.LogLimiter
}

func (l *limitedLog) Write(p []byte) (int, error) {
	if l.lim.Allow() {
		l.log.Warn(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// shutdownGrace bounds how long a graceful stop waits for answers being
// written: past it, the connections still open are closed, so that a stop
// on SQLite takes at most about this long, whatever clients do.
const shutdownGrace = 8 * time.Second

// stopServing stops hs gracefully: no request is read any more (those half
// read are cut), blocked acquires answer at once with their state, requests
// already read finish within shutdownGrace. It returns hs.Shutdown's error,
// nil when the grace ran out: closing what was left is part of the stop.
func stopServing(log *slog.Logger, hs *http.Server, eng *engine.Engine, conns *server.Conns) error {
	log.Info("shutting down")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		done <- hs.Shutdown(ctx)
	}()
	eng.Drain() // blocked acquires answer now
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// Again and again: net/http gives a connection that starts reading
		// a request a deadline of its own.
		conns.StopReading()
		select {
		case err := <-done:
			if errors.Is(err, context.DeadlineExceeded) {
				log.Warn("closing the connections still open at the end of the shutdown grace", "grace", shutdownGrace, "open", conns.Open())
				hs.Close()
				return nil
			}
			return err
		case <-tick.C:
		}
	}
}
