package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// FuzzRun feeds arbitrary bytes to the decoder and, when they decode, runs
// them against a fresh service: no input may panic or fail the engine, every
// result must have one of the contract's shapes, and a replay must give the
// same results.
func FuzzRun(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.json"))
	for _, p := range seeds {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	for _, s := range []string{`[]`, `[[]]`, `[1]`, `[["acquire"]]`, `[["acquire", 1e3, "a", "L", 5]]`,
		`[["acquire", -9223372036854775808, "a", "L", 86400], ["renew", 9223372036854775807, "a", "L", 1]]`,
		`[["repeat", 0, ["acquire", "c{i%3}", "L{i+1%2}", 5], 50, 1]]`, `[["repeat", 0, 3, 0, ["write", "L", "k{i", "v{i}", 1]]]`,
		`{"ops": [["status", 0, "x"]]}`, `[["write", 0, "L", "k", "v", 0.5]]`, `[["read", 0, "L", "k"], true, null, {}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := harness.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		if engineCalls(in.Ops) > 300 {
			t.Skip("long repeat drives are the scale suite's business")
		}
		run := func() []any {
			svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
			out, err := harness.Run(context.Background(), svc, in.Ops)
			if err != nil {
				t.Fatalf("engine failed: %v", err)
			}
			if len(out) != len(in.Ops) {
				t.Fatalf("%d results for %d operations", len(out), len(in.Ops))
			}
			return out
		}
		first := run()
		for i, r := range first {
			if err := checkShape(in.Ops[i], r); err != "" {
				t.Fatalf("op %d: %s: result %#v", i, err, r)
			}
		}
		if d := harness.Diff(in.Ops, first, run()); d != "" {
			t.Fatalf("replay differs:\n%s", d)
		}
	})
}

// checkShape reports what is wrong with result r for op, or "".
func checkShape(op, r any) string {
	if _, err := json.Marshal(r); err != nil {
		return "not JSON: " + err.Error()
	}
	name := ""
	if a, ok := op.([]any); ok && len(a) > 0 {
		name, _ = a[0].(string)
	}
	if name == "read" {
		// A read answers the stored value, any string (even "error: ..."), or null.
		if _, ok := r.(string); !ok && r != nil {
			return "read answers a string or null"
		}
		return ""
	}
	if s, ok := r.(string); ok && strings.HasPrefix(s, "error: ") {
		switch strings.TrimPrefix(s, "error: ") {
		case "unknown operation", lk.ErrInvalidArguments.Error(), lk.ErrInvalidTTL.Error(),
			lk.ErrClientBusy.Error(), lk.ErrNotHolder.Error(), lk.ErrStaleToken.Error():
			return ""
		}
		return "unknown error code"
	}
	switch name {
	case "acquire":
		if a, ok := r.([]any); !ok || len(a) < 2 {
			return "acquire must answer an array"
		}
	case "renew":
		if a, ok := r.([]any); !ok || len(a) != 3 || a[0] != "renewed" {
			return `renew must answer ["renewed", token, expires_at]`
		}
	case "release":
		if r != "released" && r != "withdrawn" {
			return "release answers released or withdrawn"
		}
	case "write":
		if r != "ok" {
			return "write answers ok"
		}
	case "inspect", "status", "repeat":
		if _, ok := r.(map[string]any); !ok {
			return name + " answers an object"
		}
	}
	return ""
}
