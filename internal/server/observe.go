package server

import (
	"net/http"
	"strings"
	"time"
)

// Observer is told what the server does, for metrics and the audit log.
// Its methods must be quick and must not call the server or the engine.
type Observer interface {
	// Request gets each HTTP request's operation, status and duration.
	Request(op string, status int, d time.Duration)
	// Denied gets each request the Authorizer refused.
	Denied(r *http.Request, a Access, d *Denial)
	// Acted gets, when the Authorizer names principals (Identifier), the
	// principal of each allowed acquire, renew and release and the client
	// id it acted as: the audit log of a deadlock abort names the
	// victim's principal as well as the requester's.
	Acted(principal, client string)
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController flush through it (GET /v1/events).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observed wraps h to report every request to the observer.
func (s *Server) observed(h http.Handler) http.Handler {
	if s.obs == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		s.obs.Request(opOf(r.URL.Path), sw.status, time.Since(start))
	})
}

// opOf names a request's operation by its path, with a bounded set of names
// (metrics labels must not grow with what callers send).
func opOf(path string) string {
	switch {
	case path == "/metrics":
		return "metrics"
	case path == "/" || strings.HasPrefix(path, "/console/"):
		return "console"
	case strings.HasPrefix(path, "/v1/"):
		switch op := strings.TrimPrefix(path, "/v1/"); op {
		case "acquire", "renew", "release", "revoke", "unfence", "write", "delete", "store/clear", "read", "inspect", "status", "locks", "history", "events", "store", "graph", "health", "ready", "openapi.json":
			return op
		}
	}
	return "other"
}
