package apitest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// The second validator: Debian's python3-jsonschema, another
// implementation of JSON Schema than libopenapi's, checks answers against
// the document in the dialect it declares (jsonSchemaDialect), and the
// document's schemas against that dialect's metaschema. A recorder
// collects real answers; SecondOpinion hands them to jsonschema_check.py.

//go:embed jsonschema_check.py
var jsonschemaCheck []byte

// Python is the interpreter that runs the check: Debian's, where
// python3-jsonschema is installed. The python3 on the PATH may be another
// one, without it.
const Python = "/usr/bin/python3"

// Answer is one answer as SecondOpinion checks it: to Method and Path (no
// query), its Status and JSON Body (nil for none, as HEAD's); or, with
// Event, the data of one message of GET /v1/events.
type Answer struct {
	Method string          `json:"method,omitempty"`
	Path   string          `json:"path,omitempty"`
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Event  bool            `json:"event,omitempty"`
}

func (a Answer) String() string {
	if a.Event {
		return fmt.Sprintf("event %s", a.Body)
	}
	return fmt.Sprintf("%s %s %d %s", a.Method, a.Path, a.Status, a.Body)
}

// Recorder collects the answers that pass through its Transport: those
// with a JSON body, and HEAD's. It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	answers []Answer
}

// Add records a (an event's data, say).
func (r *Recorder) Add(a Answer) {
	r.mu.Lock()
	r.answers = append(r.answers, a)
	r.mu.Unlock()
}

// Answers returns what was recorded so far.
func (r *Recorder) Answers() []Answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Answer(nil), r.answers...)
}

// Transport returns a RoundTripper that sends each request through base
// (http.DefaultTransport when nil) and records its answer. Other answers
// (the metrics' text, an event stream) go through unread.
func (r *Recorder) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		res, err := base.RoundTrip(req)
		if err != nil {
			return res, err
		}
		a := Answer{Method: req.Method, Path: req.URL.Path, Status: res.StatusCode}
		if req.Method == http.MethodHead {
			r.Add(a)
			return res, nil
		}
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" {
			return res, nil
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(body))
		if err == nil && json.Valid(body) {
			a.Body = body
			r.Add(a)
		}
		return res, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// NeedJSONSchema skips tb when Python or its jsonschema module is missing,
// but under CI (CI set), which installs python3-jsonschema (.ci/run) and
// never skips: there it fails tb.
func NeedJSONSchema(tb testing.TB) {
	tb.Helper()
	out, err := exec.Command(Python, "-c", "import jsonschema").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("the second validator needs %s with python3-jsonschema (apt-get install python3-jsonschema): %v %s",
		Python, err, bytes.TrimSpace(out))
	if os.Getenv("CI") != "" {
		tb.Fatal(msg + "; CI never skips it")
	}
	tb.Skip("skipping: " + msg)
}

// Verdicts runs the second validator over answers and returns its
// verdict on each, "" for a valid one, and the problems it found in the
// document itself. It skips tb as NeedJSONSchema does.
func Verdicts(tb testing.TB, answers []Answer) (each []string, document []string) {
	tb.Helper()
	NeedJSONSchema(tb)
	dir := tb.TempDir()
	files := map[string][]byte{"openapi.json": lk.OpenAPI, "check.py": jsonschemaCheck}
	list, err := json.Marshal(answers)
	if err != nil {
		tb.Fatal(err)
	}
	files["answers.json"] = list
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	cmd := exec.Command(Python, filepath.Join(dir, "check.py"), filepath.Join(dir, "openapi.json"), filepath.Join(dir, "answers.json"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s jsonschema_check.py: %v\n%s", Python, err, stderr.String())
	}
	var res struct {
		Document []string  `json:"document"`
		Answers  []*string `json:"answers"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		tb.Fatalf("jsonschema_check.py printed what is not its verdict: %v\n%s\n%s", err, out, stderr.String())
	}
	if len(res.Document) == 0 && len(res.Answers) != len(answers) {
		tb.Fatalf("jsonschema_check.py judged %d answers of %d", len(res.Answers), len(answers))
	}
	each = make([]string, len(res.Answers))
	for i, v := range res.Answers {
		if v != nil {
			each[i] = *v
		}
	}
	return each, res.Document
}

// SecondOpinion checks answers with the second validator and fails tb
// (t.Errorf) for each one it refuses, and for each problem of the
// document. It skips tb as NeedJSONSchema does, and fails it when there is
// nothing to check.
func SecondOpinion(tb testing.TB, answers []Answer) {
	tb.Helper()
	if len(answers) == 0 {
		tb.Fatal("apitest: no answers for the second validator")
	}
	each, document := Verdicts(tb, answers)
	for _, p := range document {
		tb.Errorf("python3-jsonschema: docs/openapi.json: %s", p)
	}
	bad := 0
	for _, v := range each {
		if v != "" {
			if bad++; bad <= 20 {
				tb.Errorf("python3-jsonschema: %s", v)
			}
		}
	}
	tb.Logf("python3-jsonschema checked %d answers against docs/openapi.json: %d refused", len(answers), bad)
}
