// Package server serves the engine over HTTP (docs/api.md): each handler
// decodes its request, authorizes it, calls the engine, and encodes the
// answer. It starts no goroutine but the connections' own: the runtime
// (group commit, the lapse timer, wake-ups, the event bus) is the
// engine's.
package server

import (
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// Options configure a Server.
type Options struct {
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Authorizer judges every request; nil allows everything.
	Authorizer Authorizer
	// Metrics, when set, is served at GET /metrics (after the Authorizer).
	Metrics http.Handler
	// Observer, when set, is told about requests and refusals.
	Observer Observer
	// EventsKeepAlive is how often a quiet event stream gets a comment
	// line (0: DefaultEventsKeepAlive).
	EventsKeepAlive time.Duration
	// MaxStreams bounds the event streams open at once on this server, of
	// every principal (0: DefaultMaxStreams); beyond, 429 rate_limited.
	MaxStreams int
}

// Server is the HTTP front of one engine.
type Server struct {
	eng       *engine.Engine
	auth      Authorizer
	metrics   http.Handler
	obs       Observer
	log       *slog.Logger
	mux       *http.ServeMux
	keepAlive time.Duration

	maxStreams int
	streams    atomic.Int64 // open event streams
	queued     queued       // max_queued's record (queued.go)
}

// New returns the HTTP front of eng. Draining and closing are the engine's
// (engine.Engine.Drain, Close).
func New(eng *engine.Engine, opts Options) *Server {
	s := &Server{eng: eng, auth: opts.Authorizer, metrics: opts.Metrics, obs: opts.Observer, log: opts.Logger,
		keepAlive: opts.EventsKeepAlive, maxStreams: opts.MaxStreams}
	if s.maxStreams <= 0 {
		s.maxStreams = DefaultMaxStreams
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.keepAlive <= 0 {
		s.keepAlive = DefaultEventsKeepAlive
	}
	s.routes()
	return s
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.observed(noSniff(s.authenticated(s.mux))) }

// noSniff marks every answer, errors and JSON included, as the type it
// says: a browser must not run an answer that echoes a caller's text (a
// lock's name, a value) as HTML or script.
func noSniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}
