package validate

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
)

// CheckAPISchema names the check that every answer matches the API's
// OpenAPI document (docs/openapi.json): status, headers and body, errors
// and 503s included, before a kill and after a restart alike.
const CheckAPISchema = "api-schema"

// APIChecker checks the answers that pass through its Client against the
// API's document (internal/apitest), keeping the mismatches as violations
// rather than failing the test, so that a failpoint run can report them
// like the other checks. An answer cut off by a kill has nothing to check.
type APIChecker struct {
	v       *apitest.Validator
	mu      sync.Mutex
	vs      violations
	checked int
}

// NewAPIChecker loads the document (failing tb if it does not parse).
func NewAPIChecker(tb testing.TB) *APIChecker {
	return &APIChecker{v: apitest.New(tb)}
}

// Client is an HTTP client like traffic.HTTPClient() whose answers a checks:
// for traffic.Workload.HTTP.
func (a *APIChecker) Client() *http.Client {
	hc := traffic.HTTPClient()
	hc.Transport = apiTransport{a: a, base: hc.Transport}
	return hc
}

// Violations returns the mismatches found so far (CheckAPISchema), and
// how many answers were checked.
func (a *APIChecker) Violations() ([]Violation, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vs := a.vs
	vs.list = append([]Violation(nil), a.vs.list...)
	return vs.result(), a.checked
}

type apiTransport struct {
	a    *APIChecker
	base http.RoundTripper
}

func (t apiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		// Cut off (a kill): handed back as it came, unchecked.
		res.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return res, nil
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	cerr := t.a.v.Check(req, res.StatusCode, res.Header, body)
	t.a.mu.Lock()
	t.a.checked++
	if cerr != nil {
		t.a.vs.add(CheckAPISchema, "%s %s: status %d, body %s: %v", req.Method, req.URL.Path, res.StatusCode, bytes.TrimSpace(body), cerr)
	}
	t.a.mu.Unlock()
	return res, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
