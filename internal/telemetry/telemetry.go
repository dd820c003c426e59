// Package telemetry turns what the engine and the server do into
// Prometheus metrics and an audit log. It is an engine.Auditor, told about
// each transaction's events before the commit (the audit lines, audit.go)
// and after it (the counters) and about group commits, and a
// server.Observer, told about requests, refused requests and who acted as
// which client id.
//
// The audit log is JSON lines as log/slog writes them (or slog's text
// lines, to share a standard error with text log lines), one line per
// grant, lapse (naming the lapsed holder and its token), release,
// withdrawal, revocation, deadlock abort (with the cycle found and what the
// victim lost), refused stale write and refused request. No bearer token
// ever reaches it: the server hands over what was asked, never the
// credentials.
package telemetry

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// Gauges reads what the gauges show of the database (engine.Engine.Gauges).
type Gauges func(ctx context.Context) (service.Gauges, error)

// Options configure New.
type Options struct {
	// Principals: the server's Authorizer names principals (an auth
	// file), and the audit lines of deadlock aborts name those of the
	// victim and of the requester (Acted).
	Principals bool
	// Format is the audit lines' (JSON, the zero value, or Text). Only
	// JSON lines are read back: with Text, New neither ends a torn last
	// line nor has anything for Recover to settle.
	Format Format
}

// Telemetry keeps metrics and writes the audit log.
type Telemetry struct {
	reg   *prometheus.Registry
	audit *slog.Logger
	out   *flushWriter // the audit log's writer: whatever is written is flushed at once
	ahead aheadLog     // the lines of transactions, written ahead of their commits (audit.go)
	// refusals bounds the auth_failure lines: a client without a token
	// can cause them as fast as it connects.
	refusals *server.LogLimiter

	grants, authFailures      *prometheus.CounterVec
	rateLimited               *prometheus.CounterVec // by principal: as few as the auth file has
	lapses, releases          prometheus.Counter
	withdrawals, renewals     prometheus.Counter
	revocations, aborts       prometheus.Counter
	staleWrites, auditErrors  prometheus.Counter
	groups, groupOps          prometheus.Counter
	roundTrips                prometheus.Counter
	fenceStale                prometheus.Counter // refusals of fences in jobs' own databases (POST /v1/stale)
	requests                  *prometheus.HistogramVec
	commitSeconds, commitSize prometheus.Histogram

	// principals: name them in the audit lines of deadlock aborts, from
	// actors (Options.Principals).
	principals bool
	actors     actors
	readiness  *readiness // state.go
}

var (
	_ engine.Auditor  = (*Telemetry)(nil)
	_ server.Observer = (*Telemetry)(nil)
)

// New returns telemetry writing the audit log as JSON lines to audit (nil:
// no audit log), and reading the database gauges through gauges at each scrape.
// A transaction's lines are written at once, in one write, just before it
// commits (Audit); a refused request's line is written at once too. When
// audit is a file, New first ends a last line that a kill cut short, and
// notes the last transaction it holds for Recover to settle; then it writes
// a "start" line.
func New(audit io.Writer, gauges Gauges, opts Options) *Telemetry {
	t := &Telemetry{reg: prometheus.NewRegistry(), principals: opts.Principals}
	format := opts.Format
	if audit != nil {
		t.ahead.start(audit, format)
		t.out = &flushWriter{w: bufio.NewWriterSize(audit, 64<<10)}
		t.audit = slog.New(format.handler(t.out))
		t.refusals = server.NewLogLimiter(server.RefusalLogRate, server.RefusalLogBurst, func(n int) {
			t.log("refusals_suppressed", slog.Int("count", n))
			t.flush()
		})
	}
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "leasekeeper_" + name, Help: help})
		t.reg.MustRegister(c)
		return c
	}
	t.grants = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasekeeper_grants_total",
		Help: "Leases granted, on the spot (source=immediate) or to a waiter (source=queue)."}, []string{"source"})
	t.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasekeeper_auth_failures_total",
		Help: "Requests refused by the authorizer, by HTTP status."}, []string{"status"})
	t.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "leasekeeper_rate_limited_total",
		Help: "Requests answered 429 rate_limited: a principal over its rate, its max_waiting or its max_queued (auth file)."}, []string{"principal"})
	t.reg.MustRegister(t.rateLimited)
	t.lapses = f("lapses_total", "Leases that ran out (retired at their expiry).")
	t.releases = f("releases_total", "Leases released by their holder.")
	t.withdrawals = f("withdrawals_total", "Queued requests withdrawn by a release.")
	t.renewals = f("renewals_total", "Leases renewed.")
	t.revocations = f("revocations_total", "Leases ended by an administrator's revoke.")
	t.aborts = f("deadlock_aborts_total", "Clients aborted as deadlock victims.")
	t.staleWrites = f("stale_writes_total", "Fenced-store writes refused for a stale token.")
	t.fenceStale = f("fence_stale_total", "Stale tokens refused by fences in jobs' own databases, as the jobs reported them (POST /v1/stale).")
	t.auditErrors = f("audit_write_errors_total", "Writes of audit lines that failed (the operations went on).")
	t.groups = f("groups_total", "Group commits: transactions of the operations that arrived together, committed or not.")
	t.groupOps = f("operations_total", "Operations run in group commits.")
	t.roundTrips = f("round_trips_total",
		"Round trips of the committer's connection to PostgreSQL, counted at the driver, where a pipelined batch is one; 0 on SQLite.")
	t.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "leasekeeper_request_duration_seconds",
		Help: "HTTP request latency by operation and status code.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)},
		[]string{"op", "code"})
	t.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "leasekeeper_commit_duration_seconds",
		Help: "Time of each group commit: its operations and the sync to disk.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)})
	t.commitSize = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "leasekeeper_commit_operations",
		Help: "Operations per group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	t.reg.MustRegister(t.grants, t.authFailures, t.requests, t.commitSeconds, t.commitSize,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Shown at 0 from the start: an alert on its rate needs the series
	// before the first refusal, and an absent series reads as "not
	// exported" rather than "none".
	for _, status := range []int{401, 403} {
		t.authFailures.WithLabelValues(strconv.Itoa(status))
	}
	t.readiness = newReadiness(t.reg)
	if t.audit != nil {
		t.log("start", slog.Int("pid", os.Getpid()), slog.String("version", lk.Version))
		t.flush()
	}
	if gauges != nil {
		t.reg.MustRegister(&databaseGauges{read: gauges})
	}
	return t
}

// Handler serves the metrics in Prometheus's text format.
func (t *Telemetry) Handler() http.Handler {
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{})
}

// Committed counts what a committed transaction did. Its audit lines were
// written before it committed (Audit, audit.go).
func (t *Telemetry) Committed(events []service.Event) {
	for _, e := range events {
		switch e.Kind {
		case lk.EventGrant:
			source := "immediate"
			if e.FromQueue {
				source = "queue"
			}
			t.grants.WithLabelValues(source).Inc()
		case lk.EventLapse:
			t.lapses.Inc()
		case lk.EventRelease:
			t.releases.Inc()
		case lk.EventWithdraw:
			t.withdrawals.Inc()
		case lk.EventRevoke:
			t.revocations.Inc()
		case lk.EventDeadlockAbort:
			t.aborts.Inc()
		case lk.EventStaleWrite:
			t.staleWrites.Inc()
		case lk.EventFenceStale:
			t.fenceStale.Inc()
		case lk.EventRenew:
			t.renewals.Inc()
		}
	}
}

// Request records an HTTP request's latency.
func (t *Telemetry) Request(op string, status int, d time.Duration) {
	t.requests.WithLabelValues(op, strconv.Itoa(status)).Observe(d.Seconds())
}

// GroupCommitted records a group commit.
func (t *Telemetry) GroupCommitted(g engine.GroupStats) {
	t.commitSeconds.Observe(g.Duration.Seconds())
	t.commitSize.Observe(float64(g.Ops))
	t.groups.Inc()
	t.groupOps.Add(float64(g.Ops))
	t.roundTrips.Add(float64(g.RoundTrips))
}

// Denied counts and logs a refused request: what was asked and by whom (the
// remote address), never the credentials.
func (t *Telemetry) Denied(r *http.Request, a server.Access, d *server.Denial) {
	if d.Code == lk.CodeRateLimited {
		// Not an auth failure, and no audit line each: a principal over
		// its rate sends many, and the authorizer logs them at a bounded
		// rate.
		t.rateLimited.WithLabelValues(d.Principal).Inc()
		return
	}
	status := server.StatusOf(d.Code)
	t.authFailures.WithLabelValues(strconv.Itoa(status)).Inc()
	if t.refusals == nil || !t.refusals.Allow() {
		return
	}
	t.log("auth_failure", slog.String("op", a.Op), slog.String("client", a.Client), slog.Int("status", status),
		slog.String("code", string(d.Code)), slog.String("remote", r.RemoteAddr))
	t.flush()
}

// Flush writes out buffered audit lines (at shutdown, say).
func (t *Telemetry) Flush() error {
	if t.refusals != nil {
		t.refusals.Flush() // the count of refusals left out so far
	}
	return t.flush()
}

func (t *Telemetry) flush() error {
	if t.out == nil {
		return nil
	}
	return t.out.Flush()
}

// flushWriter is a buffered writer safe for concurrent use: the committer
// logs events while request handlers log refusals.
type flushWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (f *flushWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Write(p)
}

func (f *flushWriter) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w.Flush()
}

func (t *Telemetry) log(msg string, attrs ...slog.Attr) {
	if t.audit != nil {
		t.audit.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
	}
}
