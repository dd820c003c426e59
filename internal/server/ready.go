package server

import (
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// handleReady answers 200 only while the engine can serve writes
// (engine.Engine.Ready): health says the process lives, ready says requests
// sent now will be served. Not ready, it answers 503 with the reason, for
// a load balancer or an operator to read, beside the error object's code:
// {"status": "not_ready", "reason": "disk_full", "error": "unavailable",
// "message": ...}. What failed goes to the log only: ready is open to
// anyone.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "ready"}) {
		return
	}
	reason, err := s.eng.Ready(r.Context())
	if reason == "" {
		reply(w, lk.ReadyResult{Status: "ready"})
		return
	}
	if r.Context().Err() != nil {
		return // the caller went away: nobody to answer
	}
	code, msg := lk.CodeUnavailable, "the database cannot take writes now"
	switch reason {
	case engine.NotReadyShuttingDown:
		code, msg = lk.CodeShuttingDown, "the server is stopping"
	case engine.NotReadyCommitTimeout:
		msg = "the database did not commit within " + engine.ReadyTimeout.String()
	case engine.NotReadyCommitFailed:
		msg = "the database did not commit"
		s.log.Warn("not ready: the probe's commit failed", "err", err)
	}
	b, _ := encode(lk.NotReady{Status: "not_ready", Reason: reason, Code: code, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	if code == lk.CodeUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(StatusOf(code))
	w.Write(b)
}
