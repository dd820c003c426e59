package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// auditMessages reads the audit lines' msg values from the table of
// docs/observability.md, "The audit log".
func auditMessages(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(testutil.RepoRoot(t), "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msgs := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## The audit log"
		case in && strings.HasPrefix(line, "| `"):
			msg, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			msgs[msg] = true
		}
	}
	if len(msgs) < 10 || !msgs["grant"] || !msgs["start"] {
		t.Fatalf("docs/observability.md: the audit log's table gives %v", msgs)
	}
	return msgs
}

// parseLogLine parses one line of serve's standard error in format: a JSON
// object, or slog's text, key=value pairs whose values are bare or quoted
// as Go strings. Values come back as text, JSON ones as JSON.
func parseLogLine(format, line string) (map[string]string, error) {
	fields := map[string]string{}
	if format == "json" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) != nil {
				s = string(v)
			}
			fields[k] = s
		}
		return fields, nil
	}
	rest := line
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.ContainsAny(key, ` "`) {
			return nil, fmt.Errorf("no key=value at %q", rest)
		}
		var value string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", key, err)
			}
			value, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			value, after, _ = strings.Cut(after, " ")
			after = " " + after
		}
		fields[key] = value
		rest, ok = strings.CutPrefix(after, " ")
		if !ok && after != "" {
			return nil, fmt.Errorf("%s: no space after its value", key)
		}
	}
	return fields, nil
}

// TestServeLogFormat: everything serve writes to standard error, its log's
// lines and the audit log's, is in one format, JSON by default and text
// with --log-format text, each line parsing in full, a deadlock abort's
// lost leases and cycle included; an --audit-log file is JSON lines
// whatever the format; and the default's audit lines are read by the
// robustness tests' reader (validate.ReadAudit), as the PostgreSQL scenarios
// read each server's standard error.
func TestServeLogFormat(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	audit := auditMessages(t)
	for _, tc := range []struct {
		name, format string
		args         []string
		auditFile    bool
	}{
		{"default", "json", nil, false},
		{"text", "text", []string{"--log-format", "text"}, false},
		{"json", "json", []string{"--log-format", "json"}, false},
		{"text with an audit file", "text", []string{"--log-format", "text"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			auditPath := filepath.Join(dir, "audit.jsonl")
			args := tc.args
			if tc.auditFile {
				args = append(args, "--audit-log", auditPath)
			}
			srv := startServe(t, bin, filepath.Join(dir, "log.db"), args...)
			// A deadlock: a holds L and waits for M, which b holds; b's
			// acquire of L closes the cycle and b, the younger, is aborted.
			for _, body := range []string{
				`{"client":"a","lock":"L","ttl":30}`,
				`{"client":"b","lock":"M","ttl":30}`,
				`{"client":"a","lock":"M","ttl":30}`,
				`{"client":"b","lock":"L","ttl":30}`,
			} {
				res, err := http.Post(srv.URL()+"/v1/acquire", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
			}
			res, err := http.Post(srv.URL()+"/v1/release", "application/json", strings.NewReader(`{"client":"a","lock":"M"}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			srv.Stop()
			log := srv.Log()

			seen := map[string]int{}
			for i, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
				f, err := parseLogLine(tc.format, line)
				if err != nil || f["time"] == "" || f["msg"] == "" || !strings.Contains(" DEBUG INFO WARN ERROR ", " "+f["level"]+" ") {
					t.Errorf("standard error, line %d, is not a %s line with time, level and msg (%v): %s", i+1, tc.format, err, line)
					continue
				}
				seen[f["msg"]]++
				if f["msg"] == "deadlock_abort" {
					var lost []struct{ Lock string }
					var cycle []string
					if json.Unmarshal([]byte(f["lost"]), &lost) != nil || len(lost) != 1 || lost[0].Lock != "M" ||
						json.Unmarshal([]byte(f["cycle"]), &cycle) != nil || len(cycle) != 2 {
						t.Errorf("the deadlock abort's lost and cycle are not JSON naming M and two clients: %s", line)
					}
				}
			}
			for _, msg := range []string{"database", "listening", "shutting down"} {
				if seen[msg] == 0 {
					t.Errorf("no %q line on standard error:\n%s", msg, log)
				}
			}
			auditOut := seen
			if tc.auditFile {
				// The server's own lines: none may be taken for an audit
				// line where they share standard error.
				for msg := range seen {
					if audit[msg] {
						t.Errorf("a %q audit line on standard error, with --audit-log:\n%s", msg, log)
					}
				}
				b, err := os.ReadFile(auditPath)
				if err != nil {
					t.Fatal(err)
				}
				auditOut = map[string]int{}
				for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
					f, err := parseLogLine("json", line)
					if err != nil {
						t.Errorf("--audit-log, line %d, is not JSON (%v): %s", i+1, err, line)
					}
					auditOut[f["msg"]]++
				}
			}
			if want := map[string]int{"start": 1, "grant": 3, "deadlock_abort": 1, "release": 1}; !counts(auditOut, want) {
				t.Errorf("audit lines %v, want %v", auditOut, want)
			}

			if tc.name == "default" {
				// What the robustness tests read: each server's standard
				// error, the log's lines among the audit's.
				got, vs := validate.ReadAudit(srv.Logs()...)
				n := map[string]int{}
				for _, e := range got.Entries {
					if audit[e.Msg] {
						n[e.Msg]++
					}
				}
				if len(vs) > 0 || got.Starts != 1 || got.Torn != 0 || !counts(n, map[string]int{"start": 1, "grant": 3, "deadlock_abort": 1, "release": 1}) {
					t.Errorf("validate.ReadAudit of standard error: %v; %d starts, %d torn, audit lines %v", vs, got.Starts, got.Torn, n)
				}
			}
		})
	}
}

// counts reports whether got has want's counts for want's keys.
func counts(got, want map[string]int) bool {
	for k, n := range want {
		if got[k] != n {
			return false
		}
	}
	return true
}

// TestServeLogFormatRefused: a format serve does not know is a usage error.
func TestServeLogFormatRefused(t *testing.T) {
	root := newRoot()
	root.SetArgs([]string{"serve", "--db", filepath.Join(t.TempDir(), "x.db"), "--listen", "127.0.0.1:0", "--log-format", "xml"})
	root.SetErr(new(strings.Builder))
	err := root.Execute()
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "json or text") {
		t.Errorf("serve --log-format xml: %v, want a usage error naming json and text", err)
	}
}
