package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/engine"
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
	s.mux.Handle("POST /v1/renew", operation(s, "renew", body, decodeRenew, s.eng.Renew))
	s.mux.Handle("POST /v1/release", operation(s, "release", body, decodeRelease, s.eng.Release))
	s.mux.Handle("POST /v1/revoke", operation(s, "revoke", body, decodeRevoke, s.eng.Revoke))
	s.mux.HandleFunc("POST /v1/write", s.handleWrite)
	s.mux.Handle("POST /v1/delete", operation(s, "delete", body, decodeDelete, s.eng.Delete))                   // fencing.go
	s.mux.Handle("POST /v1/store/clear", operation(s, "store_clear", body, decodeStoreClear, s.eng.StoreClear)) // fencing.go
	s.mux.HandleFunc("POST /v1/unfence", s.handleUnfence)
	s.mux.Handle("POST /v1/stale", operation(s, "stale", body, decodeStale, s.eng.ReportStale)) // stale.go
	s.mux.Handle("GET /v1/inspect", operation(s, "inspect", query, decodeInspect, s.eng.Inspect))
	s.mux.HandleFunc("GET /v1/status", s.handleStatus)
	s.mux.Handle("GET /v1/read", operation(s, "read", query, decodeRead, s.eng.Read))
	s.mux.Handle("GET /v1/locks", operation(s, "locks", query, decodeLocks, s.eng.Locks))
	s.mux.HandleFunc("GET /v1/history", s.handleHistory)
	s.mux.HandleFunc("GET /v1/events", s.handleEvents)
	s.mux.Handle("GET /v1/store", operation(s, "store", query, decodeStore, s.eng.Store))
	s.mux.Handle("GET /v1/graph", operation(s, "graph", query, decodeGraph, s.eng.Graph))
	s.consoleRoutes()
	s.mux.HandleFunc("GET /v1/health", s.handleHealth)
	s.mux.HandleFunc("GET /v1/ready", s.handleReady)
	s.mux.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		if s.allowed(w, r, Access{Op: "openapi"}) {
			w.Header().Set("Content-Type", "application/json")
			w.Write(lk.OpenAPI)
		}
	})
	s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if s.metrics == nil {
			replyError(w, lk.Errorf(lk.CodeNotFound, "this server serves no metrics"))
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
					refuse(w, lk.Errorf(lk.CodeMethodNotAllowed, r.URL.Path+" takes "+m+", not "+r.Method))
					return
				}
			}
		}
		msg := "no such path: " + r.URL.Path
		if strings.HasPrefix(r.URL.Path, "/v1/v1/") {
			msg += " (the server's URL is its root, without /v1)"
		}
		refuse(w, lk.Errorf(lk.CodeNotFound, msg))
	})
}

// statusOf is the HTTP status of each error code (docs/api.md).
var statusOf = map[lk.ErrorCode]int{
	lk.CodeInvalidArguments: http.StatusBadRequest,
	lk.CodeInvalidTTL:       http.StatusBadRequest,
	lk.CodeClientBusy:       http.StatusConflict,
	lk.CodeNotHolder:        http.StatusConflict,
	lk.CodeStaleToken:       http.StatusConflict,
	lk.CodeUnauthenticated:  http.StatusUnauthorized,
	lk.CodeForbidden:        http.StatusForbidden,
	lk.CodeNotFound:         http.StatusNotFound,
	lk.CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	lk.CodeBodyTooLarge:     http.StatusRequestEntityTooLarge,
	lk.CodeInternal:         http.StatusInternalServerError,
	lk.CodeUnavailable:      http.StatusServiceUnavailable,
	lk.CodeShuttingDown:     http.StatusServiceUnavailable,
	lk.CodeRateLimited:      http.StatusTooManyRequests,
	lk.CodeQuotaExceeded:    http.StatusConflict,
	lk.CodeTokenNotGranted:  http.StatusConflict,
}

// StatusOf returns the HTTP status the API answers an error of code with.
func StatusOf(code lk.ErrorCode) int {
	if st, ok := statusOf[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// reply writes v as the JSON body of a 200 answer.
func reply(w http.ResponseWriter, v any) {
	b, err := encode(v)
	if err != nil {
		replyError(w, lk.Errorf(lk.CodeInternal, "encoding the answer: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// replyError writes e as the error object {"error": code, "message": ...}
// with its code's status.
func replyError(w http.ResponseWriter, e *lk.Error) {
	b, _ := encode(e)
	w.Header().Set("Content-Type", "application/json")
	if e.Code == lk.CodeUnavailable || e.Code == lk.CodeRateLimited && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(StatusOf(e.Code))
	w.Write(b)
}

// refuse answers a request refused before it is judged (malformed,
// unauthenticated, forbidden, too large, no such path), and closes its
// connection: a client that sends only such requests, holding connections
// between them, gets none to hold.
func refuse(w http.ResponseWriter, e *lk.Error) {
	w.Header().Set("Connection", "close")
	replyError(w, e)
}

// encode is JSON with a newline, and without HTML escaping: the answers are
// read by programs, and "token must be an integer >= 1" should say ">=",
// not "\u003e=".
func encode(v any) ([]byte, error) {
	if b, ok := appendAnswer(make([]byte, 0, 256), v); ok {
		return b, nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return b.Bytes(), err
}

// fail answers an operation's error: a contract error with its code and
// message, anything else as the server's failure.
func (s *Server) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, engine.ErrClosed) && errors.Is(err, engine.ErrOutcomeUnknown):
		// A blocked acquire whose wait the stop cut off: it was queued.
		replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server stopped during the operation, which may have happened: read the state before retrying"))
	case errors.Is(err, engine.ErrClosed):
		// The committer never took the operation.
		replyError(w, lk.Errorf(lk.CodeShuttingDown, "the server is stopping; the operation did not happen: retry on another server, or on this one once restarted").NotApplied())
	case errors.Is(err, context.Canceled):
		// the caller went away: nobody to answer
	case errors.Is(err, lk.ErrUnavailable) && errors.Is(err, engine.ErrOutcomeUnknown):
		// The COMMIT went out: "applied" is left out, as unknown.
		s.log.Warn("database unavailable during a commit", "err", err)
		replyError(w, lk.Errorf(lk.CodeUnavailable, "the database failed during the operation's commit, which it may have taken: read the state before retrying"))
	case errors.Is(err, lk.ErrUnavailable):
		s.log.Warn("database unavailable", "err", err)
		replyError(w, lk.Errorf(lk.CodeUnavailable, "the database is unavailable; the operation did not happen").NotApplied())
	case lk.IsContract(err), errors.Is(err, lk.ErrQuotaExceeded), errors.Is(err, lk.ErrTokenNotGranted):
		replyError(w, lk.Errorf(lk.CodeOf(err), lk.Message(err)))
	default:
		s.log.Error("operation failed", "err", err)
		replyError(w, lk.Errorf(lk.CodeInternal, "the server failed; nothing was acknowledged"))
	}
}

// fields reads a request's named fields, a JSON body's or a query's, and
// keeps the first thing wrong with them.
type fields struct {
	get   func(name string) (v any, present bool)
	query bool // a query's values are all text: "30" is the integer 30 there
	bad   *lk.Error
	// badText are the fields of a body whose string is not valid UTF-8 as
	// sent (encoding/json has made it valid with U+FFFD).
	badText map[string]bool
}

func (f *fields) fail(code lk.ErrorCode, msg string) {
	if f.bad == nil {
		f.bad = lk.Errorf(code, msg)
	}
}

// name reads a string field within the API's limits; Validate refuses an
// empty one.
func (f *fields) name(key string) string {
	v, ok := f.get(key)
	if !ok {
		f.fail(lk.CodeInvalidArguments, key+" is required: a non-empty string")
		return ""
	}
	s, isString := v.(string)
	if !isString {
		f.fail(lk.CodeInvalidArguments, key+" must be a string, got "+jsonKind(v))
		return ""
	}
	if f.badText[key] || !utf8.ValidString(s) {
		f.fail(lk.CodeInvalidArguments, key+" must be valid UTF-8: it holds bytes that are not, or a \\u escape of an unpaired surrogate")
		return ""
	}
	limit := MaxNameBytes
	if key == "value" {
		limit = MaxValueBytes
	}
	if len(s) > limit {
		f.fail(lk.CodeInvalidArguments, fmt.Sprintf("%s is longer than %d bytes", key, limit))
	}
	return s
}

// integer reads an integer field (the contract's integer: 30, not 30.0,
// "30" or 3e1); an absent one is def, or refused when required.
func (f *fields) integer(key string, required bool, def int64) int64 {
	v, ok := f.get(key)
	if !ok {
		if required {
			f.fail(lk.CodeInvalidArguments, key+" is required: an integer")
		}
		return def
	}
	var n int64
	var isInt bool
	switch x := v.(type) {
	case json.Number:
		n, isInt = lk.Integer(x)
	case string:
		if f.query {
			n, isInt = lk.Integer(json.Number(x))
		}
	}
	if !isInt {
		f.fail(lk.CodeInvalidArguments, key+" must be an integer (a JSON number without fraction or exponent), got "+jsonKind(v))
	}
	return n
}

// mode reads the optional mode; Validate refuses a string that is no mode.
func (f *fields) mode() lk.Mode {
	v, ok := f.get("mode")
	if !ok {
		return lk.Exclusive
	}
	s, isString := v.(string)
	if !isString {
		f.fail(lk.CodeInvalidArguments, `mode must be "shared" or "exclusive", got `+jsonKind(v))
	}
	return lk.Mode(s)
}

// jsonKind describes a value that had the wrong type, for a message.
func jsonKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + x.String()
	case string:
		if len(x) > 40 {
			x = x[:40] + "..."
		}
		return "the string " + strconv.Quote(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "a value of another type"
}

// body reads a POST's JSON object; fields it does not know are ignored.
// Numbers stay json.Number, so that 30.0 is told from 30.
func body(w http.ResponseWriter, r *http.Request) (*fields, *lk.Error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			return nil, lk.Errorf(lk.CodeBodyTooLarge, fmt.Sprintf("the request body is longer than %d bytes", MaxBodyBytes))
		case errors.As(err, &netErr) && netErr.Timeout():
			return nil, lk.Errorf(lk.CodeInvalidArguments, "the request body did not arrive in time (the server's --read-timeout), or the server is stopping")
		}
		return nil, lk.Errorf(lk.CodeInvalidArguments, "reading the body: "+err.Error())
	}
	m, ok := flatObject(raw)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, lk.Errorf(lk.CodeInvalidArguments, "the body must be a JSON object: "+err.Error())
		}
		if m == nil {
			return nil, lk.Errorf(lk.CodeInvalidArguments, "the body must be a JSON object, got null")
		}
		if dec.More() {
			return nil, lk.Errorf(lk.CodeInvalidArguments, "unexpected data after the JSON object")
		}
	}
	return &fields{badText: badTextFields(raw), get: func(k string) (any, bool) { v, ok := m[k]; return v, ok }}, nil
}

// query reads a GET's parameters. One given twice is refused, whatever
// its name: answering for one of ?lock=a&lock=b would leave the caller to
// guess which.
func query(_ http.ResponseWriter, r *http.Request) (*fields, *lk.Error) {
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if n := len(q[k]); n > 1 {
			return nil, lk.Errorf(lk.CodeInvalidArguments, fmt.Sprintf("the parameter %s is given %d times: give it once", strconv.Quote(k), n))
		}
	}
	return &fields{query: true, get: func(k string) (any, bool) {
		if !q.Has(k) {
			return nil, false
		}
		// Names are text: fields.name refuses bytes that are not UTF-8
		// (PostgreSQL would refuse them too).
		return q.Get(k), true
	}}, nil
}

func decodeAcquire(f *fields) lk.AcquireRequest {
	return lk.AcquireRequest{Client: f.name("client"), Lock: f.name("lock"), TTL: f.integer("ttl", true, 0), Mode: f.mode()}
}
func decodeRenew(f *fields) lk.RenewRequest {
	return lk.RenewRequest{Client: f.name("client"), Lock: f.name("lock"), TTL: f.integer("ttl", true, 0)}
}
func decodeRelease(f *fields) lk.ReleaseRequest {
	return lk.ReleaseRequest{Client: f.name("client"), Lock: f.name("lock")}
}
func decodeRevoke(f *fields) lk.RevokeRequest {
	return lk.RevokeRequest{Client: f.name("client"), Lock: f.name("lock")}
}
func decodeWrite(f *fields) lk.WriteRequest {
	return lk.WriteRequest{Lock: f.name("lock"), Key: f.name("key"), Value: f.name("value"), Token: f.integer("token", true, 0)}
}
func decodeInspect(f *fields) lk.InspectRequest {
	q := lk.InspectRequest{Lock: f.name("lock")}
	q.Limit, q.After = f.page()
	return q
}
func decodeStatus(f *fields) lk.StatusRequest {
	q := lk.StatusRequest{Client: f.name("client")}
	q.Limit, q.After = f.page()
	return q
}
func decodeRead(f *fields) lk.ReadRequest {
	return lk.ReadRequest{Lock: f.name("lock"), Key: f.name("key")}
}
func decodeLocks(f *fields) lk.LocksRequest {
	var q lk.LocksRequest
	q.Limit, q.After = f.page()
	if _, ok := f.get("prefix"); ok {
		q.Prefix = f.name("prefix")
	}
	return q
}

// request is an operation's typed request.
type request interface{ Validate() error }

// clientOf is the client id a request acts as or asks about, for the
// Authorizer; "" for the others.
func clientOf(q request) string {
	switch q := q.(type) {
	case lk.AcquireRequest:
		return q.Client
	case lk.RenewRequest:
		return q.Client
	case lk.ReleaseRequest:
		return q.Client
	case lk.RevokeRequest:
		return q.Client
	case lk.StatusRequest:
		return q.Client
	case lk.StaleRequest:
		return q.Client
	case lk.DeleteRequest:
		return q.Client
	}
	return ""
}

// lockOf is the lock of a renew or a release, for the Authorizer's
// UnlessHolds; "" for the others.
func lockOf(q request) string {
	switch q := q.(type) {
	case lk.RenewRequest:
		return q.Lock
	case lk.ReleaseRequest:
		return q.Lock
	}
	return ""
}

// decodeRequest reads a request's fields into its typed request and
// validates it: a request that is wrong is refused before it is judged.
func decodeRequest[Q request](w http.ResponseWriter, r *http.Request, read func(http.ResponseWriter, *http.Request) (*fields, *lk.Error), decode func(*fields) Q) (Q, bool) {
	var q Q
	f, bad := read(w, r)
	if bad == nil {
		q = decode(f)
		bad = f.bad
	}
	if bad == nil {
		if err := q.Validate(); err != nil {
			bad = lk.Errorf(lk.CodeOf(err), lk.Message(err))
		}
	}
	if bad != nil {
		refuse(w, bad)
		return q, false
	}
	return q, true
}

// operation serves an operation: decode, judge, call the engine, answer
// the typed result.
func operation[Q request, R any](s *Server, name string, read func(http.ResponseWriter, *http.Request) (*fields, *lk.Error),
	decode func(*fields) Q, exec func(context.Context, Q) (R, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, ok := decodeRequest(w, r, read, decode)
		if !ok || !s.allowed(w, r, Access{Op: name, Client: clientOf(q), Lock: lockOf(q)}) {
			return
		}
		res, err := exec(r.Context(), q)
		if err != nil {
			s.charge(r, name, err)
			s.fail(w, err)
			return
		}
		reply(w, res)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !s.allowed(w, r, Access{Op: "health"}) {
		return
	}
	// Not through the committer, nor its lock: health answers while the
	// database is slow or away.
	h := lk.HealthResult{Status: "ok", Version: lk.Version, ServiceID: s.eng.ServiceID()}
	if ts, ok := s.eng.Clock(); ok {
		h.Clock = &ts
	}
	reply(w, h)
}

// handleAcquire serves acquire, blocking up to "wait" seconds while the
// client is queued (docs/api.md).
func (s *Server) handleAcquire(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	q, ok := decodeRequest(w, r, body, func(f *fields) lk.AcquireRequest {
		q := decodeAcquire(f)
		secs := f.integer("wait", false, 0)
		if f.bad == nil && (secs < 0 || secs > int64(MaxWait/time.Second)) {
			f.fail(lk.CodeInvalidArguments, fmt.Sprintf("wait must be an integer from 0 to %d, got %d", int(MaxWait.Seconds()), secs))
		}
		wait = time.Duration(secs) * time.Second
		return q
	})
	if !ok || !s.allowed(w, r, Access{Op: "acquire", Client: q.Client}) {
		return
	}
	settle, ok := s.admitQueued(w, r, q.Client)
	if !ok {
		return
	}
	// Refused before it ran (max_waiting), the acquire queued nothing.
	defer settle(lk.AcquireResult{}, nil)
	release := func() {}
	if wait > 0 && s.auth != nil {
		// A blocked-acquire slot of the principal (max_waiting), held until
		// the answer: released before it is written, or deferred on every
		// other way out.
		if release, ok = s.admitted(w, r, Access{Op: "acquire", Client: q.Client}); !ok {
			return
		}
		defer release()
	}
	res, err := s.eng.Acquire(r.Context(), q, wait)
	release()
	settle(res, err)
	if err != nil {
		s.fail(w, err)
		return
	}
	reply(w, scopeAcquire(s.clientScope(r), res))
}
