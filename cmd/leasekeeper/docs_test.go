package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/apitest"
)

// The examples of docs/api.md (curl) and docs/cli.md (the client commands)
// are runnable: each document's examples form one session that works, in
// order, against a new server. An example is a ```console block:
//
//	```console
//	$ curl -s localhost:7070/v1/acquire -d '...' | jq .outcome
//	"granted"
//	$ echo $?
//	0
//	```
//
// A line starting with "$ " is a command (a line ending in a backslash goes
// on with the next one); the lines after it, up to the next command or the
// end of the block, are what it prints, standard output and error together.
// "..." in an expected line stands for any text (the Go release in
// `leasekeeper version`). A command must exit 0, unless the next command is
// "echo $?", which then shows its status. The commands run in one bash, so
// that a variable set by one (TOKEN=$(...)) is there for the next.

// docsTestAddr is the address the documents' examples talk to; the test
// replaces it with its own server's.
const docsTestAddr = "localhost:7070"

// docsTestSpec says which document to run and what its examples must
// cover, so that a document cannot drop its examples unnoticed.
type docsTestSpec struct {
	path string // from the repository's root
	// outside: a line outside ```console blocks that starts with this (once
	// trimmed) is an example that would not run: refused. "" for none.
	outside string
	covers  []string // each in at least one command
	tools   []string // beyond bash, curl and jq, that the examples run
}

var docsTestSpecs = []docsTestSpec{
	{
		path:    "docs/api.md",
		outside: "curl ",
		covers: []string{"/v1/acquire", "/v1/renew", "/v1/release", "/v1/revoke", "/v1/unfence", "/v1/write", "/v1/read",
			"/v1/inspect", "/v1/status", "/v1/locks", "/v1/health", "/v1/openapi.json", "/metrics", `"wait"`,
			"limit=", "after=", "prefix=", "/v1/events", "/v1/stale", "/v1/delete", "/v1/store/clear"},
	},
	{
		path: "docs/cli.md",
		covers: []string{"leasekeeper acquire", "leasekeeper renew", "leasekeeper release", "leasekeeper revoke", "leasekeeper unfence",
			"leasekeeper inspect", "leasekeeper status", "leasekeeper locks", "leasekeeper write", "leasekeeper read",
			"leasekeeper exec", "leasekeeper version", "leasekeeper watch", "--pretty", "--prefix", "--wait",
			"leasekeeper delete", "leasekeeper store clear",
			"leasekeeper completion bash", "leasekeeper completion fish", "leasekeeper fence install", "leasekeeper fence sql", "--shared-lock", "LEASEKEEPER_LOCKS"},
		tools: []string{"sqlite3"},
	},
	{
		path:   "docs/fencing.md",
		covers: []string{"leasekeeper fence install", "leasekeeper fence sql", "leasekeeper exec", "--print"},
		tools:  []string{"sqlite3"},
	},
}

// docExample is one command of a document and what it prints.
type docExample struct {
	line int    // the command's first line in the document
	cmd  string // the command, its continuation lines included
	want []string
}

// TestDocsExamples runs the examples of docs/api.md and docs/cli.md with
// bash, each document's against a new `leasekeeper serve` of its own, and
// checks every command's exit status and output. The server's answers pass
// through a proxy that checks them against docs/openapi.json, and then go
// to the second validator (python3-jsonschema) too.
func TestDocsExamples(t *testing.T) {
	docsNeedTools(t, "curl", "jq")
	bin := buildBinary(t)
	for _, spec := range docsTestSpecs {
		t.Run(filepath.Base(spec.path), func(t *testing.T) {
			t.Parallel()
			docsNeedTools(t, spec.tools...)
			examples := readDocExamples(t, spec)
			srv := startServe(t, bin, filepath.Join(t.TempDir(), "docs.db"))
			rec := &apitest.Recorder{}
			proxy := docsProxy(t, srv.URL(), rec)
			runDocExamples(t, spec.path, examples, bin, proxy)
			t.Run("python3-jsonschema", func(t *testing.T) { apitest.SecondOpinion(t, rec.Answers()) })
		})
	}
}

// docsNeedTools skips the test when one of tools is missing, but in CI (CI
// set), which never skips: .ci/run installs them.
func docsNeedTools(t *testing.T, tools ...string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("the documents' examples run with bash: %v", err)
	}
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("the documents' examples need %s, not found on PATH (apt-get install %s)",
		strings.Join(missing, " and "), strings.Join(missing, " "))
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI never skips them")
	}
	t.Skip("skipping: " + msg)
}

// readDocExamples reads the ```console blocks of spec's document, in order.
func readDocExamples(t *testing.T, spec docsTestSpec) []docExample {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", filepath.FromSlash(spec.path)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		examples []docExample
		inBlock  bool // in a ```console block
		blockCmd bool // the block had a command already
		fenced   bool // in another fenced block
		cont     bool // the last command line ended in a backslash
		n        int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case inBlock && line == "```":
			if cont {
				t.Errorf("%s:%d: the block ends in the middle of a command", spec.path, n)
			}
			inBlock, cont = false, false
		case inBlock && cont:
			ex := &examples[len(examples)-1]
			ex.cmd += "\n" + line
			cont = strings.HasSuffix(line, `\`)
		case inBlock && strings.HasPrefix(line, "$ "):
			cmd := strings.TrimPrefix(line, "$ ")
			examples = append(examples, docExample{line: n, cmd: cmd})
			blockCmd = true
			cont = strings.HasSuffix(cmd, `\`)
		case inBlock:
			if !blockCmd {
				t.Fatalf("%s:%d: output before any command of its ```console block", spec.path, n)
			}
			ex := &examples[len(examples)-1]
			ex.want = append(ex.want, line)
		case line == "```console":
			if fenced {
				t.Fatalf("%s:%d: a ```console block inside another fenced block", spec.path, n)
			}
			inBlock, blockCmd = true, false
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		default:
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "$ ") || (spec.outside != "" && strings.HasPrefix(trimmed, spec.outside)) {
				t.Errorf("%s:%d: an example outside a ```console block, which the test would not run: %s", spec.path, n, trimmed)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if inBlock {
		t.Fatalf("%s: a ```console block is not closed", spec.path)
	}
	if len(examples) == 0 {
		t.Fatalf("%s has no ```console examples", spec.path)
	}
	for _, c := range spec.covers {
		found := false
		for _, ex := range examples {
			found = found || strings.Contains(ex.cmd, c)
		}
		if !found {
			t.Errorf("%s: no example has %q", spec.path, c)
		}
	}
	return examples
}

// docsProxy returns the URL of a proxy to the server at base that checks
// every answer against the OpenAPI document and records it in rec (the
// examples' curl and leasekeeper commands talk to it).
func docsProxy(t *testing.T, base string, rec *apitest.Recorder) string {
	t.Helper()
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: rec.Transport(apitest.New(t).Transport(t, nil)),
	})
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// runDocExamples runs examples in order in one bash, with localhost:7070
// replaced by server's address, LEASEKEEPER_SERVER set to it and bin first
// on PATH as leasekeeper, and checks what each printed and its status.
func runDocExamples(t *testing.T, doc string, examples []docExample, bin, server string) {
	t.Helper()
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	results := t.TempDir()
	outFile := func(i int) string { return filepath.Join(results, strconv.Itoa(i)+".out") }
	statusFile := func(i int) string { return filepath.Join(results, strconv.Itoa(i)+".status") }

	// Each command runs in the script's own shell (variables carry over),
	// without standard input, its output in a file of its own; $? before it
	// is the previous command's status, for "echo $?".
	var script strings.Builder
	script.WriteString("set -o pipefail\n__docs_status=0\n")
	for i, ex := range examples {
		cmd := strings.ReplaceAll(ex.cmd, docsTestAddr, u.Host)
		fmt.Fprintf(&script, "# %s:%d\n(exit $__docs_status); {\n%s\n} </dev/null >%s 2>&1; __docs_status=$?; echo $__docs_status >%s\n",
			doc, ex.line, cmd, shellQuote(outFile(i)), shellQuote(statusFile(i)))
	}
	scriptFile := filepath.Join(results, "examples.sh")
	if err := os.WriteFile(scriptFile, []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEASEKEEPER_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LEASEKEEPER_SERVER="+server)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptFile)
	cmd.Dir, cmd.Env = work, env
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("bash %s: %v\n%s", doc, err, out)
	}

	for i, ex := range examples {
		where := fmt.Sprintf("%s:%d: $ %s", doc, ex.line, ex.cmd)
		st, err := os.ReadFile(statusFile(i))
		if err != nil {
			t.Errorf("%s\ndid not run", where)
			continue
		}
		out, err := os.ReadFile(outFile(i))
		if err != nil {
			t.Fatal(err)
		}
		status, _ := strconv.Atoi(strings.TrimSpace(string(st)))
		// A status other than 0 must be shown by the next command.
		statusShown := i+1 < len(examples) && examples[i+1].cmd == "echo $?"
		var got []string
		if len(out) > 0 {
			got = strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		}
		if !docLinesMatch(ex.want, got) || (status != 0 && !statusShown) {
			t.Errorf("%s\nexit status %d; printed:\n%s\nthe document shows (exit status 0 unless the next command is echo $?):\n%s",
				where, status, indentLines(got), indentLines(ex.want))
		}
	}
}

// docLinesMatch reports whether got is what want shows: the same lines,
// where "..." in a wanted line stands for any text.
func docLinesMatch(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i, w := range want {
		if !docLineMatches(w, got[i]) {
			return false
		}
	}
	return true
}

func docLineMatches(want, got string) bool {
	parts := strings.Split(want, "...")
	if len(parts) == 1 {
		return got == want
	}
	rest, ok := strings.CutPrefix(got, parts[0])
	if !ok {
		return false
	}
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

func indentLines(lines []string) string {
	if len(lines) == 0 {
		return "    (nothing)"
	}
	return "    " + strings.Join(lines, "\n    ")
}

// shellQuote quotes s for bash, between single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
