package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/repo"
)

// Readiness: can the engine serve writes now? A write that fails because
// the storage itself does (repo.ErrDiskFull, repo.ErrDatabaseDown) makes it
// not ready at once, whoever sent it; it is ready again only once a write
// has reached the database itself: on SQLite a checkpoint into the main
// file, not a commit into the WAL's free room (which a full disk still
// takes, so that a probe alone would flap); on PostgreSQL a commit. Each
// change is logged once and told to the Observer.

// Why the engine is not ready: the reasons GET /v1/ready answers with and
// the metrics show (docs/observability.md). Alerts pick them by name
// (deploy/prometheus/alerts.yml): rename none.
const (
	// NotReadyShuttingDown: a graceful stop has begun.
	NotReadyShuttingDown = "shutting_down"
	// NotReadyDiskFull: SQLite could not write its files (a full disk, a
	// file size limit or quota, an I/O error).
	NotReadyDiskFull = "disk_full"
	// NotReadyDatabaseUnavailable: PostgreSQL could not be reached, or did
	// not take the write (a lost connection, a read-only standby).
	NotReadyDatabaseUnavailable = "database_unavailable"
	// NotReadyCommitTimeout: the probe's commit took longer than
	// ReadyTimeout.
	NotReadyCommitTimeout = "commit_timeout"
	// NotReadyCommitFailed: the probe's commit failed otherwise.
	NotReadyCommitFailed = "commit_failed"
)

// NotReadyReasons lists every reason, for metrics that show each from the
// start.
var NotReadyReasons = []string{NotReadyShuttingDown, NotReadyDiskFull, NotReadyDatabaseUnavailable,
	NotReadyCommitTimeout, NotReadyCommitFailed}

// ReadyTimeout bounds how long Ready waits for the database: a probe must
// answer in the probe's own time, and a database that takes longer than
// this to commit a group is not serving anyone well either.
const ReadyTimeout = 2 * time.Second

// readiness is the engine's state: "" while ready, else the storage's
// reason (NotReadyDiskFull or NotReadyDatabaseUnavailable).
type readiness struct {
	log   *slog.Logger
	obs   Observer
	peers bool // PostgreSQL: a commit reaches the database

	mu     sync.Mutex
	reason string
}

// storageReason is the reason a failed write's err makes the engine not
// ready, "" when it is no failure of the storage.
func storageReason(err error) string {
	switch {
	case errors.Is(err, repo.ErrDiskFull):
		return NotReadyDiskFull
	case errors.Is(err, repo.ErrDatabaseDown):
		return NotReadyDatabaseUnavailable
	}
	return ""
}

// failed notes a write that failed with err: not ready, if the storage
// failed.
func (r *readiness) failed(err error) {
	reason := storageReason(err)
	if reason == "" {
		return
	}
	r.mu.Lock()
	changed := r.reason != reason
	r.reason = reason
	r.mu.Unlock()
	if changed {
		r.log.Error("not ready: a write failed for want of its storage; ready again once a write reaches the database",
			"reason", reason, "err", err)
		r.tell(reason)
	}
}

// recovered notes a write that reached the database: ready.
func (r *readiness) recovered() {
	r.mu.Lock()
	was := r.reason
	r.reason = ""
	r.mu.Unlock()
	if was != "" {
		r.log.Info("ready again: a write reached the database", "was", was)
		r.tell("")
	}
}

// state is "" while ready, else why not.
func (r *readiness) state() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason
}

func (r *readiness) tell(reason string) {
	if r.obs != nil {
		r.obs.Ready(reason)
	}
}

// afterGroup settles readiness after a group: err is the group's (nil when
// it committed), and the engine, not ready, is ready again only once a
// checkpoint has written the committed pages into the database file
// (checkpoint runs between groups, on the writer's connection).
func (r *readiness) afterGroup(err error, checkpoint func() error) {
	if err != nil {
		r.failed(err)
		return
	}
	if r.state() == "" {
		return
	}
	if !r.peers {
		if err := checkpoint(); err != nil {
			r.failed(err)
			return
		}
	}
	r.recovered()
}

// Ready reports whether the engine can serve writes now: reason is "" when
// it can, else one of NotReadyReasons, with err, what failed, for the log.
// Its probe is an operation of the next group, which writes the service
// row (a group that writes nothing commits on a full disk); on a busy
// server it rides in a group that forms anyway, on an idle one it costs a
// transaction that writes one row. A group that commits proves more
// (PostgreSQL: the connection, the service-row lock, a primary that accepts
// writes) than a ping. After a storage failure, the probe's group is what
// lets the engine find out that it is ready again (readiness.afterGroup).
func (e *Engine) Ready(ctx context.Context) (reason string, err error) {
	reason, err = probe(ctx, e)
	if reason == "" {
		reason = e.ready.state() // a probe in the WAL's free room is not enough
	}
	if e.obs != nil {
		e.obs.Ready(reason)
	}
	return reason, err
}

// probe runs the probe and names what it found.
func probe(ctx context.Context, e *Engine) (reason string, err error) {
	select {
	case <-e.draining:
		return NotReadyShuttingDown, ErrDraining
	default:
	}
	// submit waits for the group whatever the caller's context says: the
	// probe runs in a goroutine of its own, so that the answer does not
	// wait for a stalled group. It ends when the group does (the database
	// deadline bounds that) or when the engine closes.
	done := make(chan error, 1)
	go func() {
		done <- e.com.submit(context.WithoutCancel(ctx), "ready", func(context.Context, int64) error {
			e.r.markDirty()
			return nil
		})
	}()
	timer := time.NewTimer(ReadyTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		switch {
		case err == nil:
			return "", nil
		case errors.Is(err, ErrClosed):
			return NotReadyShuttingDown, err
		case storageReason(err) != "":
			return storageReason(err), err
		}
		return NotReadyCommitFailed, err
	case <-timer.C:
		return NotReadyCommitTimeout, errors.New("the database did not commit within " + ReadyTimeout.String())
	case <-e.draining:
		return NotReadyShuttingDown, ErrDraining
	case <-ctx.Done():
		return NotReadyCommitTimeout, ctx.Err()
	}
}

// ErrDraining: the engine drains, for a shutdown.
var ErrDraining = errors.New("the engine is stopping")
