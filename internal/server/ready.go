package server

import (
	"errors"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// handleReady answers 200 only while the engine can commit
// (engine.Engine.Ready): health says the process lives, ready says requests
// sent now will be served.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "ready"}) {
		return
	}
	err := s.eng.Ready(r.Context())
	switch {
	case err == nil:
		reply(w, lk.ReadyResult{Status: "ready"})
	case errors.Is(err, engine.ErrDraining), errors.Is(err, engine.ErrClosed):
		replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server is stopping"))
	case errors.Is(err, engine.ErrReadyTimeout):
		replyError(w, lk.Errorf(lk.CodeUnavailable, err.Error()))
	case errors.Is(err, engine.ErrNotReady):
		// Whatever failed, requests sent now would fail too: not ready.
		// The cause goes to the log only: ready is open to anyone.
		s.log.Warn("not ready: the probe's commit failed", "err", err)
		replyError(w, lk.Errorf(lk.CodeUnavailable, engine.ErrNotReady.Error()))
	}
	// Otherwise the caller went away: nobody to answer.
}
