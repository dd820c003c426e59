// Package apitest checks HTTP answers against the API's OpenAPI document
// (leasekeeper.OpenAPI, docs/openapi.json).
//
// A test that talks to a server wraps its transport:
//
//	v := apitest.New(t)
//	hc := &http.Client{Transport: v.Transport(t, nil)}
//
// and every JSON answer is then checked against the operation of its
// request: its status must be one the operation lists, its body must match
// that status's schema (result objects allow no undocumented field), and
// the headers the document describes must match theirs. A mismatch fails
// the test with t.Errorf. Check does the same for one answer at hand.
//
// A second validator, another implementation of JSON Schema, checks
// answers a Recorder collected: SecondOpinion (jsonschema.go) runs
// Debian's python3-jsonschema on them.
package apitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	liberrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"

	lk "github.com/leasekeeper/leasekeeper"
)

// Validator checks answers against the OpenAPI document. It is safe for
// concurrent use.
type Validator struct {
	v     validator.Validator
	model *v3.Document
	paths map[string]*v3.PathItem // by exact path

	// Stand-ins for what the document cannot describe: answers to a path
	// it does not have, and to a method its path does not have.
	unknownPath, unknownMethod *v3.PathItem
	unknownPathCodes           []int
	unknownMethodCodes         []int

	openapi any // the document, decoded, to compare GET /v1/openapi.json with
}

var (
	once   sync.Once
	shared *Validator
	errNew error
)

// New returns the Validator of lk.OpenAPI. The document is parsed once per
// process; a document that does not parse fails tb.
func New(tb testing.TB) *Validator {
	tb.Helper()
	once.Do(func() { shared, errNew = build(lk.OpenAPI) })
	if errNew != nil {
		tb.Fatalf("apitest: %v", errNew)
	}
	return shared
}

// The statuses, with their responses of components/responses, that a path
// or a method the document does not have may answer: 404 or 405 (405 on
// /v1 paths only: another method of /metrics is an unknown path), or what a
// server answers before it routes a request (401 with an auth file, 500,
// 503 while it stops).
var (
	unknownPathResponses   = map[int]string{401: "Unauthenticated", 404: "NotFound", 500: "Internal", 503: "Unavailable"}
	unknownMethodResponses = map[int]string{401: "Unauthenticated", 405: "MethodNotAllowed", 500: "Internal", 503: "Unavailable"}
)

func build(spec []byte) (*Validator, error) {
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the OpenAPI model: %w", err)
	}
	val := validator.NewValidatorFromV3Model(&model.Model)
	val.SetDocument(doc)
	v := &Validator{v: val, model: &model.Model, paths: map[string]*v3.PathItem{}}
	for p := model.Model.Paths.PathItems.First(); p != nil; p = p.Next() {
		v.paths[p.Key()] = p.Value()
	}
	if v.unknownPath, v.unknownPathCodes, err = v.standIn(unknownPathResponses); err != nil {
		return nil, err
	}
	if v.unknownMethod, v.unknownMethodCodes, err = v.standIn(unknownMethodResponses); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(spec, &v.openapi); err != nil {
		return nil, err
	}
	return v, nil
}

// standIn makes a path item whose GET answers the statuses of responses,
// with the document's components/responses.
func (v *Validator) standIn(responses map[int]string) (*v3.PathItem, []int, error) {
	codes := orderedmap.New[string, *v3.Response]()
	var list []int
	for code := 100; code < 600; code++ { // in order, for the messages
		name, ok := responses[code]
		if !ok {
			continue
		}
		r, ok := v.model.Components.Responses.Get(name)
		if !ok || r == nil {
			return nil, nil, fmt.Errorf("the OpenAPI document has no components/responses/%s", name)
		}
		codes.Set(strconv.Itoa(code), r)
		list = append(list, code)
	}
	return &v3.PathItem{Get: &v3.Operation{Responses: &v3.Responses{Codes: codes}}}, list, nil
}

// Check validates one answer, of status with header and body, to req
// against the document: against the operation of req's method and path
// (the query string plays no part in the match). An answer to a path the
// document does not have must be an Error with 404 (or 401, 500, 503); to
// a method its path does not have, an Error with 405 (or 401, 500, 503).
// The operations list 404 and 405 too, for the requests that miss them
// (components/responses NotFound and MethodNotAllowed say so): a request
// that matches an operation is never answered 404 or 405 but by GET
// /metrics on a server without metrics. The answer to HEAD is checked as
// its operation's (GET's where the document has none) with an empty body.
// Check also wants a Retry-After header with 503 unavailable, and GET
// /v1/openapi.json to answer the document itself.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if req == nil || req.URL == nil {
		return fmt.Errorf("apitest: no request, or no URL")
	}
	if header == nil {
		header = http.Header{}
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	path := req.URL.Path
	// The validator looks at the method, the path and the context only.
	vreq := &http.Request{Method: method, URL: req.URL, Header: http.Header{}}
	vreq = vreq.WithContext(req.Context())

	item, where := v.paths[path], ""
	switch {
	case item == nil:
		item, where = v.unknownPath, fmt.Sprintf("path %s is not in the document: ", path)
		vreq.Method = http.MethodGet
	case operation(item, method) == nil && !strings.HasPrefix(path, "/v1/"):
		// Outside /v1 (GET /metrics), the server knows no other method:
		// its answer is an unknown path's.
		item, where = v.unknownPath, fmt.Sprintf("%s %s is not in the document: ", method, path)
		vreq.Method = http.MethodGet
	case operation(item, method) == nil:
		item, where = v.unknownMethod, fmt.Sprintf("%s %s is not in the document: ", method, path)
		vreq.Method = http.MethodGet
	}
	res := &http.Response{
		StatusCode: status,
		Header:     header,
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    vreq,
	}
	if where == "" && (status == http.StatusMethodNotAllowed || status == http.StatusNotFound && path != "/metrics") {
		return fmt.Errorf("apitest: %s %s answered %d: the document lists it for the requests that miss the operation, not for its own method and path", method, path, status)
	}
	if method != http.MethodHead && len(bytes.TrimSpace(body)) == 0 {
		// The validator takes an empty body for an absent one, which every
		// answer of the document has.
		return fmt.Errorf("apitest: %s%s %s answered %d with an empty body", where, method, path, status)
	}
	if method == http.MethodHead {
		// No body to check: only that GET may answer the status.
		if op := operation(item, method); op.Responses == nil || op.Responses.Codes.GetOrZero(strconv.Itoa(status)) == nil {
			return fmt.Errorf("apitest: %s%s %s answered %d, a status it does not list", where, method, path, status)
		}
		return nil
	}
	if ok, errs := v.v.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(vreq, res, item, path); !ok {
		if where != "" && len(errs) == 1 && errs[0].ValidationSubType == helpers.ResponseBodyResponseCode {
			codes := v.unknownPathCodes
			if item == v.unknownMethod {
				codes = v.unknownMethodCodes
			}
			return fmt.Errorf("apitest: %s%s %s answered %d, want an Error with one of %v", where, method, path, status, codes)
		}
		return fmt.Errorf("apitest: %s%s", where, describe(method, path, status, errs))
	}
	if status == http.StatusServiceUnavailable && header.Get("Retry-After") == "" {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error == string(lk.CodeUnavailable) {
			return fmt.Errorf("apitest: %s %s answered 503 unavailable without a Retry-After header", method, path)
		}
	}
	if where == "" && path == "/v1/openapi.json" && status == http.StatusOK {
		var got any
		if err := json.Unmarshal(body, &got); err != nil || !reflect.DeepEqual(got, v.openapi) {
			return fmt.Errorf("apitest: GET /v1/openapi.json answered a document other than docs/openapi.json")
		}
	}
	return nil
}

// operation returns item's operation of method, or nil; for HEAD, GET's
// where item has no HEAD of its own (net/http answers HEAD as GET).
func operation(item *v3.PathItem, method string) *v3.Operation {
	switch method {
	case http.MethodHead:
		if item.Head != nil {
			return item.Head
		}
		return item.Get
	case http.MethodGet:
		return item.Get
	case http.MethodPost:
		return item.Post
	case http.MethodPut:
		return item.Put
	case http.MethodDelete:
		return item.Delete
	case http.MethodPatch:
		return item.Patch
	case http.MethodOptions:
		return item.Options
	case http.MethodTrace:
		return item.Trace
	}
	return nil
}

// describe makes one message of the validator's errors.
func describe(method, path string, status int, errs []*liberrors.ValidationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s answered %d, which does not match the document:", method, path, status)
	seen := map[string]bool{}
	line := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			b.WriteString("\n\t" + s)
		}
	}
	for _, e := range errs {
		line(e.Message + ": " + e.Reason)
		for _, f := range e.SchemaValidationErrors {
			at := f.FieldPath
			if at == "" {
				at = "$"
			}
			line("  at " + at + ": " + f.Reason)
		}
	}
	return b.String()
}

// Transport returns a RoundTripper that sends each request through base
// (http.DefaultTransport when nil) and checks its answer with Check,
// failing tb with tb.Errorf (the method, path, status, body and what did
// not match) on a mismatch. It hands back the answer with the whole body
// read, ready to be read again.
//
// It reads and checks the bodies of JSON answers, text/plain ones (the
// metrics, and the answers of a handler that wrongly uses http.Error) and
// those without a Content-Type; others (an event stream, say) go through
// unread and unchecked, so streams still stream. An answer whose body
// breaks off is handed back as it came, the break included, unchecked.
// After tb's test has ended, mismatches are no longer reported.
func (v *Validator) Transport(tb testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &transport{v: v, tb: tb, base: base}
	tb.Cleanup(func() { t.done.Store(true) })
	return t
}

type transport struct {
	v    *Validator
	tb   testing.TB
	base http.RoundTripper
	done atomic.Bool
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil || res == nil || !checked(res.Header.Get("Content-Type")) {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return res, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	if cerr := t.v.Check(req, res.StatusCode, res.Header, body); cerr != nil && !t.done.Load() {
		t.tb.Errorf("%s %s: status %d, body %s\n%v", req.Method, req.URL.Path, res.StatusCode, bytes.TrimSpace(body), cerr)
	}
	return res, nil
}

// checked reports whether Transport reads and checks an answer of
// Content-Type ct.
func checked(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return true // a malformed Content-Type: Check says so
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/plain"
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
