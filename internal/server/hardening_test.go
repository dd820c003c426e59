package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/server"
)

// TestNoSniffOnEveryAnswer: every answer, not only the console's files,
// tells a browser not to guess its type: a JSON answer or an error that
// echoes a caller's text must never be run as HTML.
func TestNoSniffOnEveryAnswer(t *testing.T) {
	f := start(t, 1000)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/v1/health", ""},
		{"GET", "/v1/ready", ""},
		{"GET", "/v1/openapi.json", ""},
		{"POST", "/v1/acquire", `{"client":"c","lock":"L","ttl":10}`},
		{"POST", "/v1/acquire", `{"client":"<script>","lock":"L"}`},
		{"GET", "/v1/inspect?lock=L", ""},
		{"GET", "/v1/no-such-path", ""},
		{"DELETE", "/v1/acquire", ""},
		{"GET", "/metrics", ""},
	} {
		req, _ := http.NewRequest(c.method, f.url+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s %s (HTTP %d): X-Content-Type-Options %q, want nosniff", c.method, c.path, resp.StatusCode, got)
		}
	}
}

// TestRepeatedQueryParameter: a parameter given twice is refused, rather
// than answered for one of its values, and nothing is read.
func TestRepeatedQueryParameter(t *testing.T) {
	f := start(t, 1000)
	f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": "a", "ttl": 100})
	for _, path := range []string{
		"/v1/inspect?lock=a&lock=b",
		"/v1/read?lock=a&key=k&key=j",
		"/v1/status?client=c&client=d",
		"/v1/locks?limit=1&limit=2",
		"/v1/history?lock=a&lock=a",
		"/v1/store?lock=a&lock=b",
		"/v1/graph?lock=a&lock=b",
	} {
		status, v := f.call("GET", path, nil)
		expectError(t, status, v, lk.CodeInvalidArguments, "given 2 times")
	}
	// Once each, the same reads are answered.
	status, _ := f.call("GET", "/v1/inspect?lock=a", nil)
	if status != http.StatusOK {
		t.Errorf("inspect with one lock: HTTP %d", status)
	}
}

// TestEmptyValueRefused: the contract's rule 7 wants a non-empty value, and
// docs/api.md's limits say so: an empty one is refused and stores nothing.
func TestEmptyValueRefused(t *testing.T) {
	f := start(t, 1000)
	_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": "L", "ttl": 100})
	token := v.(map[string]any)["token"]
	status, v := f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k", "value": "", "token": token})
	expectError(t, status, v, lk.CodeInvalidArguments, "value must be a non-empty string")
	_, v = f.call("GET", "/v1/read?lock=L&key=k", nil)
	expect(t, v, `{"value": null}`)
}

// TestLimitsDocumentEmptyValue: docs/api.md's limits give names and values
// the bounds the server applies, a value's lower one included (rule 7: a
// non-empty string).
func TestLimitsDocumentEmptyValue(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{
		"| lock, client and key names | 1 to " + thousands(server.MaxNameBytes) + " bytes of UTF-8 |",
		"| values | 1 to " + thousands(server.MaxValueBytes) + " bytes of UTF-8 |",
	} {
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/api.md's limits have no row %q", row)
		}
	}
}

// thousands writes n as the documents do: 65,536.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
