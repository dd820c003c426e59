package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	lk "github.com/leasekeeper/leasekeeper"
)

// marshal is json.Marshal for values that cannot fail.
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// answer is one HTTP answer to check.
type answer struct {
	name   string
	method string
	target string // path and query
	status int
	header http.Header // jsonHeader when nil
	body   []byte
}

func (a answer) check(v *Validator) error {
	h := a.header
	if h == nil {
		h = jsonHeader
	}
	req := httptest.NewRequest(a.method, a.target, nil)
	return v.Check(req, a.status, h, a.body)
}

func holders(n int) []lk.Holder {
	hs := make([]lk.Holder, n)
	for i := range hs {
		hs[i] = lk.Holder{Client: fmt.Sprintf("job-%d", i), Mode: lk.Shared, Token: int64(i + 1), ExpiresAt: 1767225630}
	}
	return hs
}

// validAnswers holds an answer of every result type and outcome, and of
// every error status, each of them one the document allows.
func validAnswers(t testing.TB) []answer {
	value := "rows 1-100"
	next := "exports/daily"
	errBody := func(e *lk.Error) []byte { return marshal(t, e) }
	return []answer{
		{"acquire granted", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Granted, Token: 7, GrantedAt: 1767225600, ExpiresAt: 1767225630})},
		{"acquire granted at 0", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Granted, Token: 1, GrantedAt: 0, ExpiresAt: 30})},
		{"acquire granted with victims", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Granted, Token: 2, GrantedAt: 100, ExpiresAt: 103, Victims: []string{"bob"}})},
		{"acquire queued", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Queued, Position: 1})},
		{"acquire queued with victims", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Queued, Position: 1, Victims: []string{"v", "x"}})},
		{"acquire deadlock", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Deadlock, Victims: []string{"x", "me"}})},
		{"acquire withdrawn", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Withdrawn})},
		{"renew", "POST", "/v1/renew", 200, nil, marshal(t, lk.RenewResult{Outcome: lk.Renewed, Token: 7, GrantedAt: 1767225600, ExpiresAt: 1767225660})},
		{"release released", "POST", "/v1/release", 200, nil, marshal(t, lk.ReleaseResult{Outcome: lk.Released})},
		{"release withdrawn", "POST", "/v1/release", 200, nil, marshal(t, lk.ReleaseResult{Outcome: lk.Withdrawn})},
		{"revoke", "POST", "/v1/revoke", 200, nil, marshal(t, lk.RevokeResult{Outcome: lk.Revoked})},
		{"write", "POST", "/v1/write", 200, nil, marshal(t, lk.WriteResult{Outcome: lk.OK})},
		{"unfence", "POST", "/v1/unfence", 200, nil, marshal(t, lk.UnfenceResult{Outcome: lk.OK, Was: 9223372036854775807, Highest: 3})},
		{"unfence of a lock never written", "POST", "/v1/unfence", 200, nil, marshal(t, lk.UnfenceResult{Outcome: lk.OK})},
		{"read value", "GET", "/v1/read?lock=L&key=k", 200, nil, marshal(t, lk.ReadResult{Value: &value, Token: 7})},
		{"read null", "GET", "/v1/read?lock=L&key=k", 200, nil, marshal(t, lk.ReadResult{})},
		{"inspect", "GET", "/v1/inspect?lock=L", 200, nil, marshal(t, lk.InspectResult{Lock: "L", Holders: holders(2), Queue: []lk.Waiter{{Client: "w", Mode: lk.Exclusive, Position: 1}}})},
		{"inspect idle", "GET", "/v1/inspect?lock=L", 200, nil, marshal(t, lk.InspectResult{Lock: "L", Holders: []lk.Holder{}, Queue: []lk.Waiter{}})},
		{"status registered", "GET", "/v1/status?client=a", 200, nil, marshal(t, lk.StatusResult{Client: "a", Age: 3, Holds: []lk.Holder{{Lock: "L", Mode: lk.Exclusive, Token: 4, ExpiresAt: 1767225630}}, Waiting: &lk.WaitingFor{Lock: "M", Position: 2}})},
		{"status unregistered", "GET", "/v1/status?client=a", 200, nil, marshal(t, lk.StatusResult{Client: "a"})},
		{"locks page", "GET", "/v1/locks?limit=1", 200, nil, marshal(t, lk.LocksResult{Locks: []lk.LockSummary{{Lock: "L", Holders: holders(1), Waiting: 2}}, Next: &next})},
		{"locks last page", "GET", "/v1/locks", 200, nil, marshal(t, lk.LocksResult{Locks: []lk.LockSummary{}})},
		{"health", "GET", "/v1/health", 200, nil, marshal(t, lk.HealthResult{Status: "ok", Clock: ptr(int64(1767225600)), Version: lk.Version})},
		{"health without clock", "GET", "/v1/health", 200, http.Header{"Content-Type": {"application/json; charset=utf-8"}}, marshal(t, lk.HealthResult{Status: "ok", Version: lk.Version})},
		{"health HEAD", "HEAD", "/v1/health", 200, nil, nil},
		{"openapi", "GET", "/v1/openapi.json", 200, nil, lk.OpenAPI},
		{"metrics", "GET", "/metrics", 200, http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}}, []byte("# TYPE up gauge\nup 1\n")},

		{"invalid_arguments", "POST", "/v1/acquire", 400, nil, errBody(lk.Errorf(lk.CodeInvalidArguments, "lock is longer than 256 bytes"))},
		{"invalid_ttl", "POST", "/v1/renew", 400, nil, errBody(lk.Errorf(lk.CodeInvalidTTL, "ttl must be from 1 to 86400 seconds, got 0"))},
		{"invalid_arguments of a read", "GET", "/v1/locks?limit=1001", 400, nil, errBody(lk.Errorf(lk.CodeInvalidArguments, "limit must be from 1 to 1000, got 1001"))},
		{"unauthenticated", "GET", "/v1/inspect?lock=L", 401, nil, errBody(lk.ErrUnauthenticated)},
		{"forbidden", "POST", "/v1/revoke", 403, nil, errBody(lk.ErrForbidden)},
		{"client_busy", "POST", "/v1/acquire", 409, nil, errBody(lk.ErrClientBusy)},
		{"not_holder", "POST", "/v1/release", 409, nil, errBody(lk.ErrNotHolder)},
		{"stale_token", "POST", "/v1/write", 409, nil, errBody(lk.ErrStaleToken)},
		{"token_not_granted", "POST", "/v1/write", 409, nil, errBody(lk.ErrTokenNotGranted)},
		{"body_too_large", "POST", "/v1/write", 413, nil, errBody(lk.ErrBodyTooLarge)},
		{"internal", "GET", "/v1/status?client=a", 500, nil, errBody(lk.ErrInternal)},
		{"unavailable", "POST", "/v1/acquire", 503, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}}, errBody(lk.ErrUnavailable)},
		{"shutting_down", "GET", "/v1/health", 503, nil, errBody(lk.ErrShuttingDown)},
		{"metrics off", "GET", "/metrics", 404, nil, errBody(lk.ErrNotFound)},
		{"unknown path", "GET", "/v1/nope", 404, nil, errBody(lk.ErrNotFound)},
		{"unknown path, unauthenticated", "POST", "/nope", 401, nil, errBody(lk.ErrUnauthenticated)},
		{"unknown method", "GET", "/v1/acquire", 405, nil, errBody(lk.ErrMethodNotAllowed)},
		{"unknown method of an open path", "DELETE", "/v1/health", 405, nil, errBody(lk.ErrMethodNotAllowed)},
		{"unknown method of /metrics", "POST", "/metrics", 404, nil, errBody(lk.ErrNotFound)},
	}
}

func TestValidAnswersPass(t *testing.T) {
	v := New(t)
	for _, a := range validAnswers(t) {
		if err := a.check(v); err != nil {
			t.Errorf("%s: %s %s %d %s:\n%v", a.name, a.method, a.target, a.status, a.body, err)
		}
	}
}

// TestMismatchesFail plants answers the document refuses: each must fail,
// or the checks do not bite.
func TestMismatchesFail(t *testing.T) {
	v := New(t)
	for _, a := range mismatchedAnswers(t) {
		err := a.check(v)
		if err == nil {
			t.Errorf("%s: %s %s %d %s passed; want a mismatch", a.name, a.method, a.target, a.status, a.body)
			continue
		}
		t.Logf("%s: %v", a.name, err)
	}
}

// mismatchedAnswers are answers the document, or Check's rules beyond it,
// refuse.
func mismatchedAnswers(t testing.TB) []answer {
	value := "v"
	granted := `{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`
	textPlain := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
	return []answer{
		{"renamed field", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"granted","tok":7,"granted_at":1767225600,"expires_at":1767225630}`)},
		{"undocumented field", "POST", "/v1/acquire", 200, nil, []byte(strings.Replace(granted, "}", `,"lease_id":"x"}`, 1))},
		{"undocumented field in a nested object", "GET", "/v1/inspect?lock=L", 200, nil, []byte(`{"lock":"L","holders":[{"client":"a","mode":"shared","token":1,"expires_at":2,"age":1}],"queue":[]}`)},
		{"undocumented field of health", "GET", "/v1/health", 200, nil, []byte(`{"status":"ok","clock":null,"version":"0.2.0","uptime":3}`)},
		{"positional tuple", "POST", "/v1/acquire", 200, nil, []byte(`["granted",7,1767225630]`)},
		{"old string result", "POST", "/v1/release", 200, nil, []byte(`"released"`)},
		{"holder as a tuple", "GET", "/v1/inspect?lock=L", 200, nil, []byte(`{"lock":"L","holders":[["a","shared",1,2]],"queue":[]}`)},
		{"granted without token", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"granted","granted_at":1,"expires_at":2}`)},
		{"queued with a token", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"queued","position":1,"token":3}`)},
		{"queued at position 0", "POST", "/v1/acquire", 200, nil, marshal(t, lk.AcquireResult{Outcome: lk.Queued})},
		{"deadlock without victims", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"deadlock","victims":[]}`)},
		{"withdrawn with a position", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"withdrawn","position":1}`)},
		{"unknown outcome", "POST", "/v1/acquire", 200, nil, []byte(`{"outcome":"maybe"}`)},
		{"outcome of another operation", "POST", "/v1/release", 200, nil, marshal(t, lk.RevokeResult{Outcome: lk.Revoked})},
		{"token written as a string", "POST", "/v1/renew", 200, nil, []byte(`{"outcome":"renewed","token":"7","granted_at":1,"expires_at":2}`)},
		{"token 0", "POST", "/v1/renew", 200, nil, marshal(t, lk.RenewResult{Outcome: lk.Renewed, GrantedAt: 1, ExpiresAt: 2})},
		{"read value without token", "GET", "/v1/read?lock=L&key=k", 200, nil, marshal(t, lk.ReadResult{Value: &value})},
		{"read null with a token", "GET", "/v1/read?lock=L&key=k", 200, nil, []byte(`{"value":null,"token":3}`)},
		{"status age 0 rather than null", "GET", "/v1/status?client=a", 200, nil, []byte(`{"client":"a","age":0,"holds":[],"waiting":null}`)},
		{"status holds null", "GET", "/v1/status?client=a", 200, nil, []byte(`{"client":"a","age":null,"holds":null,"waiting":null}`)},
		{"nil slices marshal as null", "GET", "/v1/inspect?lock=L", 200, nil, marshal(t, lk.InspectResult{Lock: "L"})},
		{"locks without next", "GET", "/v1/locks", 200, nil, []byte(`{"locks":[]}`)},
		{"the old locks array", "GET", "/v1/locks", 200, nil, []byte(`[]`)},
		{"health without version", "GET", "/v1/health", 200, nil, []byte(`{"status":"ok","clock":1}`)},
		{"another document", "GET", "/v1/openapi.json", 200, nil, []byte(`{"openapi":"3.1.0"}`)},
		{"empty body", "POST", "/v1/acquire", 200, nil, nil},
		{"JSON as text/plain", "POST", "/v1/acquire", 200, textPlain, []byte(granted)},
		{"metrics as JSON", "GET", "/metrics", 200, nil, []byte(`{}`)},

		{"unknown error code", "POST", "/v1/acquire", 409, nil, []byte(`{"error":"lease_lost","message":"x"}`)},
		{"code of another status", "POST", "/v1/acquire", 409, nil, marshal(t, lk.ErrInvalidTTL)},
		{"code the operation cannot answer", "POST", "/v1/acquire", 409, nil, marshal(t, lk.ErrNotHolder)},
		{"invalid_ttl of release", "POST", "/v1/release", 400, nil, marshal(t, lk.ErrInvalidTTL)},
		{"old error string", "POST", "/v1/renew", 409, nil, []byte(`"error: not holder"`)},
		{"empty message", "POST", "/v1/renew", 409, nil, []byte(`{"error":"not_holder","message":""}`)},
		{"error without message", "POST", "/v1/renew", 409, nil, []byte(`{"error":"not_holder"}`)},
		{"error with an extra field", "POST", "/v1/renew", 409, nil, []byte(`{"error":"not_holder","message":"m","lock":"L"}`)},
		{"unavailable without Retry-After", "POST", "/v1/acquire", 503, nil, marshal(t, lk.ErrUnavailable)},
		{"Retry-After not a number", "POST", "/v1/acquire", 503, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"soon"}}, marshal(t, lk.ErrUnavailable)},

		{"wrong status for the path", "GET", "/v1/health", 409, nil, marshal(t, lk.ErrNotHolder)},
		{"400 for health", "GET", "/v1/health", 400, nil, marshal(t, lk.ErrInvalidArguments)},
		{"404 of a known operation", "POST", "/v1/acquire", 404, nil, marshal(t, lk.ErrNotFound)},
		{"405 of a known operation", "POST", "/v1/acquire", 405, nil, marshal(t, lk.ErrMethodNotAllowed)},
		{"405 of a known GET", "GET", "/v1/health", 405, nil, marshal(t, lk.ErrMethodNotAllowed)},
		{"413 of a GET", "GET", "/v1/inspect?lock=L", 413, nil, marshal(t, lk.ErrBodyTooLarge)},
		{"401 of the open health", "GET", "/v1/health", 401, nil, marshal(t, lk.ErrUnauthenticated)},
		{"a result with an error status", "POST", "/v1/acquire", 409, nil, []byte(granted)},
		{"an error with 200", "POST", "/v1/acquire", 200, nil, marshal(t, lk.ErrClientBusy)},
		{"HEAD with a status GET lacks", "HEAD", "/v1/health", 409, nil, nil},
		{"token_not_granted of an unfence", "POST", "/v1/unfence", 409, nil, marshal(t, lk.ErrTokenNotGranted)},
		{"unfence without the fence before", "POST", "/v1/unfence", 200, nil, []byte(`{"outcome":"ok","highest":1}`)},

		{"200 of an unknown path", "GET", "/v1/nope", 200, nil, []byte(granted)},
		{"405 of an unknown path", "GET", "/v1/nope", 405, nil, marshal(t, lk.ErrMethodNotAllowed)},
		{"404 with another code", "GET", "/v1/nope", 404, nil, marshal(t, lk.ErrMethodNotAllowed)},
		{"ServeMux's text 404", "GET", "/v1/nope", 404, textPlain, []byte("404 page not found\n")},
		{"ServeMux's text 405", "GET", "/v1/acquire", 405, textPlain, []byte("Method Not Allowed\n")},
		{"404 of an unknown method", "GET", "/v1/acquire", 404, nil, marshal(t, lk.ErrNotFound)},
		{"405 of an unknown method of /metrics", "POST", "/metrics", 405, nil, marshal(t, lk.ErrMethodNotAllowed)},
		{"unknown code of an unknown path", "GET", "/v1/nope", 404, nil, []byte(`{"error":"no_such_path","message":"x"}`)},
	}
}

// TestCheckIgnoresQuery: the query string plays no part in finding the
// operation.
func TestCheckIgnoresQuery(t *testing.T) {
	v := New(t)
	req := httptest.NewRequest("GET", "/v1/health?x=/v1/acquire&y", nil)
	if err := v.Check(req, 200, jsonHeader, marshal(t, lk.HealthResult{Status: "ok", Version: "x"})); err != nil {
		t.Fatal(err)
	}
}

func TestDocumentIsValidOpenAPI31(t *testing.T) {
	v := New(t)
	if v.model.Version != "3.1.0" {
		t.Errorf("openapi is %q, want 3.1.0", v.model.Version)
	}
	if ok, errs := v.v.ValidateDocument(); !ok {
		t.Errorf("the document is not a valid OpenAPI 3.1 document:\n%s", describe("", "docs/openapi.json", 0, errs))
	}

	// The validation bites: a parameter in the body is not OpenAPI 3.
	bad := bytes.Replace(lk.OpenAPI, []byte(`"in": "query"`), []byte(`"in": "body"`), 1)
	if bytes.Equal(bad, lk.OpenAPI) {
		t.Fatal(`no "in": "query" in the document to plant a mistake in`)
	}
	doc, err := libopenapi.NewDocument(bad)
	if err == nil {
		var val validator.Validator
		var errs []error
		if val, errs = validator.NewValidator(doc); len(errs) == 0 {
			if ok, _ := val.ValidateDocument(); ok {
				t.Error(`a document with "in": "body" passed the validation`)
			}
		}
	}
}

// Check's rules beyond the answers' shapes and statuses, which the second
// validator does not know: mismatches it lets pass.
var checkOnlyRules = map[string]bool{
	"another document":                true, // GET /v1/openapi.json answers docs/openapi.json
	"empty body":                      true,
	"JSON as text/plain":              true, // Content-Type: the recorder keeps JSON answers only
	"ServeMux's text 404":             true,
	"ServeMux's text 405":             true,
	"unavailable without Retry-After": true, // headers
	"Retry-After not a number":        true,
	"404 of a known operation":        true, // 404 and 405 are listed for the requests that miss the operation
	"405 of a known operation":        true,
	"405 of a known GET":              true,
}

// asAnswer is a as the second validator takes it.
func asAnswer(a answer) (Answer, bool) {
	path, _, _ := strings.Cut(a.target, "?")
	out := Answer{Method: a.method, Path: path, Status: a.status}
	if a.method == "HEAD" {
		return out, true
	}
	h := a.header
	if h == nil {
		h = jsonHeader
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "application/json") || !json.Valid(a.body) {
		return out, false
	}
	out.Body = a.body
	return out, true
}

// TestSecondOpinionBites: the second validator (python3-jsonschema) passes
// every valid answer and refuses every mismatch that is the answer's shape
// or status (a deadlock without victims among them: the minItems beside a
// $ref that draft-07 would ignore); events too.
func TestSecondOpinionBites(t *testing.T) {
	var answers []Answer
	var names []string
	var want []bool // valid
	for _, a := range validAnswers(t) {
		if x, ok := asAnswer(a); ok {
			answers, names, want = append(answers, x), append(names, a.name), append(want, true)
		}
	}
	for _, a := range mismatchedAnswers(t) {
		if x, ok := asAnswer(a); ok && !checkOnlyRules[a.name] {
			answers, names, want = append(answers, x), append(names, a.name), append(want, false)
		}
	}
	events := []struct {
		name  string
		valid bool
		data  string
	}{
		{"grant event", true, `{"id":3,"kind":"grant","at":1767225600,"lock":"L","client":"etl-a","token":1,"mode":"exclusive","expires_at":1767225630}`},
		{"release event", true, `{"id":4,"kind":"release","at":1767225610,"lock":"L","client":"etl-a","token":1,"mode":"exclusive"}`},
		{"event of an unknown kind", false, `{"id":3,"kind":"granted","at":1767225600,"lock":"L","client":"etl-a","token":1,"mode":"exclusive"}`},
		{"event without its id", false, `{"kind":"grant","at":1767225600,"lock":"L","client":"etl-a","token":1,"mode":"exclusive"}`},
	}
	for _, e := range events {
		answers, names, want = append(answers, Answer{Event: true, Body: json.RawMessage(e.data)}), append(names, e.name), append(want, e.valid)
	}
	each, document := Verdicts(t, answers)
	for _, p := range document {
		t.Errorf("docs/openapi.json: %s", p)
	}
	for i, v := range each {
		switch {
		case want[i] && v != "":
			t.Errorf("%s: %s refused: %s", names[i], answers[i], v)
		case !want[i] && v == "":
			t.Errorf("%s: %s passed; want it refused", names[i], answers[i])
		}
	}
	t.Logf("%d answers: %d valid, %d mismatches", len(answers), strings.Count(fmt.Sprint(want), "true"), strings.Count(fmt.Sprint(want), "false"))
}
