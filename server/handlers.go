package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/service"
)

// Limits of docs/api.md.
const (
	MaxNameBytes  = 256
	MaxValueBytes = 65536
	MaxBodyBytes  = 131072
	MaxWait       = 3600 * time.Second
)

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/acquire", s.handleAcquire)
	s.mux.HandleFunc("POST /v1/renew", s.post("renew", "client", "lock", "ttl"))
	s.mux.HandleFunc("POST /v1/release", s.post("release", "client", "lock"))
	s.mux.HandleFunc("POST /v1/revoke", s.handleRevoke)
	s.mux.HandleFunc("POST /v1/write", s.post("write", "lock", "key", "value", "token"))
	s.mux.HandleFunc("GET /v1/inspect", s.get("inspect", "lock"))
	s.mux.HandleFunc("GET /v1/status", s.get("status", "client"))
	s.mux.HandleFunc("GET /v1/read", s.get("read", "lock", "key"))
	s.mux.HandleFunc("GET /v1/locks", s.handleLocks)
	s.mux.HandleFunc("GET /v1/health", s.handleHealth)
	s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if s.metrics == nil {
			reply(w, http.StatusNotFound, "error: not found")
			return
		}
		if s.allowed(w, r, Access{Op: "metrics"}) {
			s.metrics.ServeHTTP(w, r)
		}
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			for _, m := range []string{"GET", "POST"} {
				if _, pattern := s.mux.Handler(&http.Request{Method: m, URL: r.URL}); pattern != "/" && pattern != "" {
					reply(w, http.StatusMethodNotAllowed, "error: method not allowed")
					return
				}
			}
		}
		reply(w, http.StatusNotFound, "error: not found")
	})
}

// reply writes a contract result (or error string) as the JSON body.
func reply(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`"error: internal"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// statusOf maps a contract result to its HTTP status (docs/api.md).
func statusOf(res any) int {
	str, ok := res.(string)
	if !ok || !strings.HasPrefix(str, "error: ") {
		return http.StatusOK
	}
	switch strings.TrimPrefix(str, "error: ") {
	case "client busy", "not holder", "stale token":
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// answer runs a contract operation and writes its result.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, name string, args ...any) {
	res, err := s.do(r.Context(), name, args...)
	if err != nil {
		s.fail(w, err)
		return
	}
	reply(w, statusOf(res), res)
}

func (s *Server) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrClosed) {
		reply(w, http.StatusServiceUnavailable, "error: shutting down")
		return
	}
	if errors.Is(err, context.Canceled) {
		return // the caller went away: nobody to answer
	}
	if errors.Is(err, lk.ErrUnavailable) {
		s.log.Warn("database unavailable", "err", err)
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusServiceUnavailable, "error: unavailable")
		return
	}
	s.log.Error("operation failed", "err", err)
	reply(w, http.StatusInternalServerError, "error: internal")
}

// body decodes a request body into its fields, numbers kept as json.Number
// so that the contract's validation sees them as written, and checks the
// limits; why says what is wrong, or is "".
func body(w http.ResponseWriter, r *http.Request) (fields map[string]any, why string) {
	fields, why = decodeBody(w, r)
	if why == "" {
		why = checkLimits(fields)
	}
	return fields, why
}

func decodeBody(w http.ResponseWriter, r *http.Request) (map[string]any, string) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, "too large"
		}
		return nil, "the body is not a JSON object"
	}
	if dec.More() {
		return nil, "unexpected data after the JSON object"
	}
	return fields, ""
}

// checkLimits refuses names and values beyond docs/api.md's limits.
func checkLimits(fields map[string]any) string {
	for _, f := range []string{"client", "lock", "key"} {
		if v, ok := fields[f].(string); ok && len(v) > MaxNameBytes {
			return fmt.Sprintf("%s is longer than %d bytes", f, MaxNameBytes)
		}
	}
	if v, ok := fields["value"].(string); ok && len(v) > MaxValueBytes {
		return fmt.Sprintf("value is longer than %d bytes", MaxValueBytes)
	}
	return ""
}

func badRequest(w http.ResponseWriter, why string) {
	if why == "too large" {
		reply(w, http.StatusRequestEntityTooLarge, "error: request body too large")
		return
	}
	reply(w, http.StatusBadRequest, "error: invalid arguments: "+why)
}

// post serves an operation whose arguments come from a JSON body's fields,
// in the contract's order. A missing field is nil, which the contract's
// validation refuses.
func (s *Server) post(name string, fields ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f, why := body(w, r)
		if why != "" {
			badRequest(w, why)
			return
		}
		client, _ := f["client"].(string)
		if !s.allowed(w, r, Access{Op: name, Client: client}) {
			return
		}
		args := make([]any, len(fields))
		for i, k := range fields {
			args[i] = f[k]
		}
		s.answer(w, r, name, args...)
	}
}

// get serves an operation whose arguments are query parameters.
func (s *Server) get(name string, params ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f := map[string]any{}
		args := make([]any, len(params))
		for i, p := range params {
			if q.Has(p) {
				// As encoding/json does for bodies: a name is text, and
				// PostgreSQL refuses bytes that are not UTF-8.
				v := strings.ToValidUTF8(q.Get(p), "\uFFFD")
				f[p] = v
				args[i] = v
			}
		}
		if why := checkLimits(f); why != "" {
			badRequest(w, why)
			return
		}
		client, _ := f["client"].(string)
		if !s.allowed(w, r, Access{Op: name, Client: client}) {
			return
		}
		s.answer(w, r, name, args...)
	}
}

func (s *Server) handleLocks(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "locks"}) {
		return
	}
	res, err := s.submit(r.Context(), "locks", func(ctx context.Context, ts int64) (any, error) {
		return s.svc.Locks(ctx, ts)
	})
	locks, _ := res.([]lk.LockSummary)
	if err != nil {
		s.fail(w, err)
		return
	}
	out := make([]any, len(locks))
	for i, l := range locks {
		holders := make([]any, len(l.Holders))
		for j, h := range l.Holders {
			holders[j] = []any{h.Client, string(h.Mode), h.Token, h.ExpiresAt}
		}
		out[i] = map[string]any{"lock": l.Lock, "holders": holders, "waiting": l.Waiting}
	}
	reply(w, http.StatusOK, out)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "health"}) {
		return
	}
	// Not through the committer, nor its lock: health answers while the
	// database is slow or away.
	ts := s.lastTS.Load()
	var clock any
	if ts != math.MinInt64 {
		clock = ts
	}
	reply(w, http.StatusOK, map[string]any{"status": "ok", "clock": clock})
}

// handleRevoke serves revoke: the holder's lease ends now, as a release
// would (docs/api.md). It is not a contract operation, so it is validated
// here and runs through the committer like the others.
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	f, why := body(w, r)
	client, ok1 := f["client"].(string)
	lock, ok2 := f["lock"].(string)
	if why == "" && (!ok1 || !ok2 || client == "" || lock == "") {
		why = "client and lock must be non-empty strings"
	}
	if why != "" {
		badRequest(w, why)
		return
	}
	if !s.allowed(w, r, Access{Op: "revoke", Client: client}) {
		return
	}
	// Not a contract operation, so not through the harness: the service's
	// answer is turned into the same kind of result here.
	res, err := s.submit(r.Context(), "revoke", func(ctx context.Context, ts int64) (any, error) {
		err := s.svc.Revoke(ctx, ts, client, lock)
		if code := lk.Code(err); code != "" {
			return "error: " + code, nil
		}
		if err != nil {
			return nil, err
		}
		return "revoked", nil
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	reply(w, statusOf(res), res)
}

// handleAcquire serves acquire, blocking up to "wait" seconds while the
// client is queued (docs/api.md).
func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) {
	f, why := body(w, r)
	var wait time.Duration
	if why == "" {
		if v, present := f["wait"]; present {
			secs, ok := harness.Integer(v)
			if !ok || secs < 0 || secs > int64(MaxWait/time.Second) {
				why = fmt.Sprintf("wait must be an integer from 0 to %d", int(MaxWait.Seconds()))
			}
			wait = time.Duration(secs) * time.Second
		}
	}
	if why != "" {
		badRequest(w, why)
		return
	}
	if c, _ := f["client"].(string); !s.allowed(w, r, Access{Op: "acquire", Client: c}) {
		return
	}
	args := []any{f["client"], f["lock"], f["ttl"]}
	if m, present := f["mode"]; present {
		args = append(args, m)
	}
	client, _ := f["client"].(string)
	lock, _ := f["lock"].(string)
	var events <-chan service.Event
	if wait > 0 {
		// Subscribe before the acquire so that no grant can slip between.
		var done func()
		events, done = s.subscribe(client)
		defer done()
	}
	res, err := s.do(r.Context(), "acquire", args...)
	if err != nil {
		s.fail(w, err)
		return
	}
	queued, ok := res.([]any)
	if wait == 0 || !ok || queued[0] != "queued" {
		reply(w, statusOf(res), res)
		return
	}
	res, err = s.await(r.Context(), client, lock, wait, events, queued)
	if err != nil {
		s.fail(w, err)
		return
	}
	reply(w, statusOf(res), res)
}

// await blocks until client, queued for lock, is granted it, aborted or
// withdrawn, or the wait runs out, and returns the result to answer.
func (s *Server) await(ctx context.Context, client, lock string, wait time.Duration, events <-chan service.Event, queued []any) (any, error) {
	var victims []any
	if len(queued) == 3 {
		victims, _ = queued[2].([]any)
	}
	granted := func(token, expiresAt int64) any {
		res := []any{"granted", token, expiresAt}
		if len(victims) > 0 {
			res = append(res, victims)
		}
		return res
	}
	// decide turns an event into the answer, or reports that it is not one.
	// The events of this wait are those of its queue entry: pos, learnt
	// from the EventQueued of the acquire, which reaches the channel before
	// the acquire is answered. Events of an earlier wait of the same client
	// may still be on their way (from another server, or from a group that
	// committed just before this acquire's) and carry another position.
	var pos int64
	decide := func(e service.Event) (any, bool) {
		if e.Lock != lock {
			return nil, false
		}
		if e.Kind == service.EventQueued {
			pos = e.Position
			return nil, false
		}
		if pos == 0 || e.Position != pos {
			return nil, false
		}
		switch {
		case e.Kind == service.EventGranted && e.FromQueue:
			return granted(e.Token, e.ExpiresAt), true
		case e.Kind == service.EventAborted:
			return []any{"deadlock", []any{client}}, true
		case e.Kind == service.EventWithdrawn:
			return "withdrawn", true
		}
		return nil, false
	}
	timeout := s.clock.After(wait)
	var retry <-chan time.Time // a recheck that failed, to try again
	for {
		var final bool // answer now, queued or not
		select {
		case e := <-events:
			if e.Kind != eventRecheck {
				if res, ok := decide(e); ok {
					return res, nil
				}
				continue
			}
		case <-retry:
			retry = nil
		case <-timeout:
			final = true
		case <-s.draining:
			final = true // shutting down: answer with the state as it is
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// Read the state: the wait ran out, or (eventRecheck) news from
		// another server may have been lost. The committer hands a
		// group's events over before it answers the group's calls, so
		// once this one is answered the channel has everything this
		// server decided so far.
		res, err := s.submit(ctx, "wait-state", func(ctx context.Context, ts int64) (any, error) {
			return s.svc.WaitState(ctx, ts, client, lock)
		})
		if err != nil && !final && errors.Is(err, lk.ErrUnavailable) {
			// The database is away for the moment (the recheck is likely
			// the listener's, after it lost its connection): the client
			// is still queued, so keep waiting rather than answer 503.
			retry = time.After(250 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		for drained := false; !drained; {
			select {
			case e := <-events:
				if res, ok := decide(e); ok {
					return res, nil
				}
			default:
				drained = true
			}
		}
		st := res.(service.WaitState)
		switch {
		case st.Rank > 0 && final:
			return []any{"queued", st.Rank}, nil
		case st.Rank > 0:
			// still waiting
		case st.Hold != nil:
			return granted(st.Hold.Token, st.Hold.ExpiresAt), nil
		case !st.Registered:
			return []any{"deadlock", []any{client}}, nil
		default:
			return "withdrawn", nil
		}
	}
}
