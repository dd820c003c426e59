package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// ReadyTimeout bounds how long GET /v1/ready waits for the database before
// it answers 503: a probe must answer in the probe's own time, and a
// database that takes longer than this to commit an empty group is not
// serving anyone well either.
const ReadyTimeout = 2 * time.Second

// handleReady answers 200 only while this server can commit: health says
// the process lives, ready says requests sent now will be served. The probe
// is an empty call in the next group commit rather than a query of its own:
// the database handle is a single connection owned by the committer
// (package repo), so a query beside it would wait for it anyway, and a
// group that commits proves more (PostgreSQL: the connection, the
// service-row lock, a primary that accepts writes) than a ping. The group
// writes the service row (WriteProbe): a group that writes nothing commits
// on a full disk. On a busy server the probe rides in a group that forms
// anyway; on an idle one it costs a transaction that writes one row.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "ready"}) {
		return
	}
	select {
	case <-s.draining:
		s.noteReady(NotReadyShuttingDown)
		replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server is stopping"))
		return
	default:
	}
	// submit waits for the group whatever the caller's context says: the
	// probe runs in a goroutine of its own, so that the answer does not
	// wait for a stalled group. It ends when the group does (the database
	// deadline bounds that) or when the server closes.
	done := make(chan error, 1)
	go func() {
		done <- s.submit(context.WithoutCancel(r.Context()), "ready", func(context.Context, int64) error {
			s.svc.WriteProbe()
			return nil
		})
	}()
	timer := time.NewTimer(ReadyTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		switch {
		case errors.Is(err, ErrClosed):
			s.noteReady(NotReadyShuttingDown)
			replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server is stopping"))
		case err != nil:
			// Whatever failed, requests sent now would fail too: not ready.
			// The cause goes to the log only: ready is open to anyone.
			s.log.Warn("not ready: the probe's commit failed", "err", err)
			s.noteReady(s.notReadyReason(err))
			replyError(w, lk.Errorf(lk.CodeUnavailable, "the database did not commit"))
		default:
			s.noteReady("")
			reply(w, lk.ReadyResult{Status: "ready"})
		}
	case <-timer.C:
		s.noteReady(NotReadyCommitTimeout)
		replyError(w, lk.Errorf(lk.CodeUnavailable, "the database did not commit within "+ReadyTimeout.String()))
	case <-s.draining:
		s.noteReady(NotReadyShuttingDown)
		replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server is stopping"))
	case <-r.Context().Done():
	}
}
