package server

import (
	"errors"

	lk "github.com/leasekeeper/leasekeeper"
)

// Why a server is not ready: the reasons a ReadinessObserver is told. The
// metrics show each as a label value (docs/observability.md), and alerts
// pick them by name (deploy/prometheus/alerts.yml): rename none.
const (
	// NotReadyShuttingDown: a graceful stop has begun.
	NotReadyShuttingDown = "shutting_down"
	// NotReadyDiskFull: SQLite could not write its file (a full disk, a
	// file size limit or quota, an I/O error).
	NotReadyDiskFull = "disk_full"
	// NotReadyDatabaseUnavailable: PostgreSQL could not be reached, or did
	// not take the write (a lost connection, a standby, a lock wait cut
	// off).
	NotReadyDatabaseUnavailable = "database_unavailable"
	// NotReadyCommitTimeout: the probe's commit took longer than
	// ReadyTimeout.
	NotReadyCommitTimeout = "commit_timeout"
	// NotReadyCommitFailed: the commit failed otherwise.
	NotReadyCommitFailed = "commit_failed"
)

// NotReadyReasons lists every reason, for metrics that show each from the
// start.
var NotReadyReasons = []string{NotReadyShuttingDown, NotReadyDiskFull, NotReadyDatabaseUnavailable,
	NotReadyCommitTimeout, NotReadyCommitFailed}

// ReadinessObserver is an Observer that is also told each readiness
// verdict: reason is "" when the server is ready, one of NotReadyReasons
// when it is not. Like the Observer's methods, Ready must be quick.
type ReadinessObserver interface {
	Ready(reason string)
}

// noteReady tells the observer the verdict, if it listens for it.
func (s *Server) noteReady(reason string) {
	if o, ok := s.obs.(ReadinessObserver); ok {
		o.Ready(reason)
	}
}

// notReadyReason names why a commit that failed with err makes the server
// not ready. The repository wraps in lk.ErrUnavailable only the failures
// of the storage: on SQLite, a file that cannot be written; on
// PostgreSQL, a database out of reach or refusing the write.
func (s *Server) notReadyReason(err error) string {
	switch {
	case !errors.Is(err, lk.ErrUnavailable):
		return NotReadyCommitFailed
	case s.svc.HasPeers():
		return NotReadyDatabaseUnavailable
	default:
		return NotReadyDiskFull
	}
}
