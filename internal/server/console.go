package server

import (
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/console"
)

// The operator console (docs/console.md): a page at / and its script and
// style, read-only, reading the API with the token the operator gives it;
// and the two reads it needs that the API did not have, GET /v1/store and
// GET /v1/graph.

func decodeStore(f *fields) lk.StoreRequest {
	q := lk.StoreRequest{Lock: f.name("lock")}
	q.Limit, q.After = f.page()
	return q
}

func decodeGraph(f *fields) lk.GraphRequest {
	var q lk.GraphRequest
	if _, ok := f.get("lock"); ok {
		q.Lock = f.name("lock")
	}
	if _, ok := f.get("client"); ok {
		q.Client = f.name("client")
	}
	return q
}

// consolePolicy is the console's Content-Security-Policy: its own script
// and style files only, no inline script or style, no eval, fetches to this
// server only, no frames around it, no <base> and no form posts. A lock
// name that carried markup into the page would still run nothing.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleRoutes serves the console's files. They hold no data and no
// secret, so they are served to everyone, as /v1/openapi.json is: the
// page asks for a token before it reads anything.
func (s *Server) consoleRoutes() {
	serve := func(name, contentType string) http.HandlerFunc {
		body := console.File(name)
		return func(w http.ResponseWriter, r *http.Request) {
			if !s.allowed(w, r, Access{Op: "console"}) {
				return
			}
			h := w.Header()
			h.Set("Content-Type", contentType)
			h.Set("Content-Security-Policy", consolePolicy)
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("X-Frame-Options", "DENY")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Cross-Origin-Opener-Policy", "same-origin")
			h.Set("Cross-Origin-Resource-Policy", "same-origin")
			// A new server version brings new files: the browser asks again.
			h.Set("Cache-Control", "no-cache")
			w.Write(body)
		}
	}
	s.mux.HandleFunc("GET /{$}", serve("index.html", "text/html; charset=utf-8"))
	s.mux.HandleFunc("GET /console/app.js", serve("app.js", "text/javascript; charset=utf-8"))
	s.mux.HandleFunc("GET /console/app.css", serve("app.css", "text/css; charset=utf-8"))
}
