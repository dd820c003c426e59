package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// examplesDir holds the golden cases (the contract's worked examples among
// them), relative to this package: the model must reproduce every one.
const examplesDir = "../../testdata/golden"

// canonical parses JSON into a value whose deep equality ignores key order
// and keeps integers exact.
func canonical(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", data, err)
	}
	return v
}

// replay runs ops on a fresh model, checking the model's invariants after
// every step, and compares each result with want.
func replay(t *testing.T, ops, want []json.RawMessage) {
	t.Helper()
	if len(ops) != len(want) {
		t.Fatalf("%d ops but %d wanted results", len(ops), len(want))
	}
	m := New()
	for i, op := range ops {
		got := m.Step(op)
		if err := m.checkInvariants(); err != nil {
			t.Fatalf("op %d %s: invariant broken: %v", i, op, err)
		}
		gotJSON, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("op %d %s: result %#v does not marshal: %v", i, op, got, err)
		}
		if !reflect.DeepEqual(canonical(t, gotJSON), canonical(t, want[i])) {
			t.Errorf("op %d %s:\n got %s\nwant %s", i, op, gotJSON, want[i])
		}
	}
}

func TestExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no examples under %s", examplesDir)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var ex struct {
				Ops  []json.RawMessage `json:"ops"`
				Want []json.RawMessage `json:"want"`
			}
			if err := json.Unmarshal(data, &ex); err != nil {
				t.Fatal(err)
			}
			replay(t, ex.Ops, ex.Want)
		})
	}
}

// TestRunMatchesStep checks that Run is Step on a fresh model.
func TestRunMatchesStep(t *testing.T) {
	ops := []json.RawMessage{
		json.RawMessage(`["acquire", 0, "a", "L", 10]`),
		json.RawMessage(`["acquire", 1, "b", "L", 10]`),
		json.RawMessage(`["read", 2, "L", "k"]`),
	}
	got, err := json.Marshal(Run(ops))
	if err != nil {
		t.Fatal(err)
	}
	if want := `[["granted",1,10],["queued",1],null]`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// step is one line of a table case: an operation and its expected result.
type step struct{ op, want string }

func runTable(t *testing.T, steps []step) {
	t.Helper()
	ops := make([]json.RawMessage, len(steps))
	want := make([]json.RawMessage, len(steps))
	for i, s := range steps {
		ops[i], want[i] = json.RawMessage(s.op), json.RawMessage(s.want)
	}
	replay(t, ops, want)
}

const (
	invalid = `"error: invalid arguments"`
	unknown = `"error: unknown operation"`
	nobody  = `{"age": null, "holds": [], "waiting": null}`
)

func TestValidationOrder(t *testing.T) {
	runTable(t, []step{
		{`5`, invalid},
		{`[]`, invalid},
		{`{"0": "acquire"}`, invalid},
		{`null`, invalid},
		{`[7]`, unknown},
		{`["Acquire", 0, "a", "L", 10]`, unknown},
		{`["nope"]`, unknown},
		{`["acquire"]`, invalid},
		{`["acquire", 5.0, "a", "L", 10]`, invalid},
		{`["acquire", true, "a", "L", 10]`, invalid},
		{`["acquire", 1e3, "a", "L", 10]`, invalid},
		{`["acquire", "5", "a", "L", 10]`, invalid},
		{`["acquire", 9223372036854775808, "a", "L", 10]`, invalid},
		// The clock was never set by the rejections above; -0 is 0.
		{`["status", -0, "a"]`, nobody},
		{`["status", -1, "a"]`, invalid},
		// Type checks come before the ttl range check, all of them.
		{`["acquire", 0, "a", "L", 0, "bogus"]`, invalid},
		{`["acquire", 0, "", "L", 0]`, invalid},
		{`["acquire", 0, "a", "L", 0]`, `"error: invalid ttl"`},
		{`["acquire", 0, "a", "L", 86401]`, `"error: invalid ttl"`},
		{`["acquire", 0, "a", "L", -5]`, `"error: invalid ttl"`},
		{`["acquire", 0, "a", "L", 10.5]`, invalid},
		{`["acquire", 0, "a", "L", 10, "Shared"]`, invalid},
		{`["acquire", 0, "a", "L", 10, "shared", 1]`, invalid},
		{`["renew", 0, "a", "L", 0]`, `"error: invalid ttl"`},
		{`["write", 0, "L", "k", "v", 0]`, invalid},
		{`["write", 0, "L", "k", "v", 1.0]`, invalid},
		{`["write", 0, "L", "k", "", 1]`, invalid},
		{`["read", 0, "L"]`, invalid},
		{`["inspect", 0, 5]`, invalid},
		// Failed validation registers nobody.
		{`["status", 0, "a"]`, nobody},
		// Time advances before the element count is checked.
		{`["acquire", 0, "a", "L", 10]`, `["granted", 1, 10]`},
		{`["renew", 10, "a"]`, invalid},
		{`["status", 10, "a"]`, `{"age": 1, "holds": [], "waiting": null}`},
		{`["release", 9, "a", "L"]`, invalid},
		{`["release", 10, "a", "L"]`, `"error: not holder"`},
		{`  ["inspect", 10, "L"]  `, `{"holders": [], "queue": []}`},
	})
}

func TestLapseChains(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 0, "a", "L", 10]`, `["granted", 1, 10]`},
		{`["acquire", 1, "b", "L", 5]`, `["queued", 1]`},
		{`["acquire", 2, "c", "L", 3]`, `["queued", 2]`},
		{`["acquire", 3, "d", "L", 100]`, `["queued", 3]`},
		{`["acquire", 0 , "x", "M", 12]`, invalid},
		{`["acquire", 3, "x", "M", 12]`, `["granted", 1, 15]`},
		{`["acquire", 4, "y", "M", 1]`, `["queued", 1]`},
		// a lapses at 10, b holds [10,15), c [15,18), d from 18; the noticing
		// operation's ts plays no part.
		{`["inspect", 40, "L"]`, `{"holders": [["d", "exclusive", 4, 118]], "queue": []}`},
		{`["inspect", 40, "M"]`, `{"holders": [], "queue": []}`},
		{`["status", 40, "y"]`, `{"age": 6, "holds": [], "waiting": null}`},
		{`["release", 40, "a", "L"]`, `"error: not holder"`},
		{`["renew", 40, "c", "L", 10]`, `"error: not holder"`},
		{`["status", 41, "d"]`, `{"age": 4, "holds": [["L", "exclusive", 4, 118]], "waiting": null}`},
		// renew may shorten; the token stays.
		{`["renew", 42, "d", "L", 1]`, `["renewed", 4, 43]`},
		{`["acquire", 42, "e", "L", 7]`, `["queued", 1]`},
		{`["inspect", 43, "L"]`, `{"holders": [["e", "exclusive", 5, 50]], "queue": []}`},
		// The counter survives idleness: the next grant is 6, not 1.
		{`["acquire", 1000, "a", "L", 10]`, `["granted", 6, 1010]`},
	})
}

func TestSaturatedExpiry(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 9223372036854775000, "a", "L", 86400]`, `["granted", 1, 9223372036854775807]`},
		{`["acquire", 9223372036854775000, "b", "L", 5]`, `["queued", 1]`},
		{`["inspect", 9223372036854775806, "L"]`, `{"holders": [["a", "exclusive", 1, 9223372036854775807]], "queue": [["b", "exclusive"]]}`},
		// a lapses at the largest instant; b's lease starts and ends there too.
		{`["inspect", 9223372036854775807, "L"]`, `{"holders": [], "queue": []}`},
		{`["acquire", 9223372036854775807, "c", "L", 1]`, `["granted", 3, 9223372036854775807]`},
	})
}

func TestSharedExclusive(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 0, "w", "L", 10, "exclusive"]`, `["granted", 1, 10]`},
		{`["acquire", 1, "r1", "L", 100, "shared"]`, `["queued", 1]`},
		{`["acquire", 1, "r2", "L", 100, "shared"]`, `["queued", 2]`},
		{`["acquire", 1, "w2", "L", 100]`, `["queued", 3]`},
		{`["acquire", 1, "r3", "L", 100, "shared"]`, `["queued", 4]`},
		{`["release", 5, "w", "L"]`, `"released"`},
		{`["inspect", 5, "L"]`, `{"holders": [["r1", "shared", 2, 105], ["r2", "shared", 3, 105]], "queue": [["w2", "exclusive"], ["r3", "shared"]]}`},
		// A reader never overtakes a queued writer.
		{`["acquire", 6, "r4", "L", 100, "shared"]`, `["queued", 3]`},
		{`["release", 7, "r3", "L"]`, `"withdrawn"`},
		{`["release", 7, "r3", "L"]`, `"error: not holder"`},
		{`["release", 8, "r1", "L"]`, `"released"`},
		{`["renew", 9, "r2", "L", 1]`, `["renewed", 3, 10]`},
		{`["inspect", 10, "L"]`, `{"holders": [["w2", "exclusive", 4, 110]], "queue": [["r4", "shared"]]}`},
		// Withdrawing the head lets the compatible ones behind it in.
		{`["acquire", 11, "r5", "L", 100, "shared"]`, `["queued", 2]`},
		{`["acquire", 11, "w3", "L", 100]`, `["queued", 3]`},
		{`["acquire", 11, "r6", "L", 100, "shared"]`, `["queued", 4]`},
		{`["release", 12, "w2", "L"]`, `"released"`},
		{`["inspect", 12, "L"]`, `{"holders": [["r4", "shared", 5, 112], ["r5", "shared", 6, 112]], "queue": [["w3", "exclusive"], ["r6", "shared"]]}`},
		{`["release", 13, "w3", "L"]`, `"withdrawn"`},
		{`["inspect", 13, "L"]`, `{"holders": [["r4", "shared", 5, 112], ["r5", "shared", 6, 112], ["r6", "shared", 7, 113]], "queue": []}`},
	})
}

func TestBusyAndStore(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 0, "a", "L", 10]`, `["granted", 1, 10]`},
		{`["acquire", 0, "a", "L", 10]`, `"error: client busy"`},
		{`["acquire", 0, "a", "M", 10, "shared"]`, `["granted", 1, 10]`},
		{`["acquire", 0, "b", "L", 10]`, `["queued", 1]`},
		{`["acquire", 0, "b", "N", 10]`, `"error: client busy"`},
		{`["status", 0, "b"]`, `{"age": 2, "holds": [], "waiting": "L"}`},
		{`["status", 0, "a"]`, `{"age": 1, "holds": [["L", "exclusive", 1, 10], ["M", "shared", 1, 10]], "waiting": null}`},
		// The store ignores leases and the lock table.
		{`["write", 0, "X", "k", "v1", 5]`, `"ok"`},
		{`["write", 0, "X", "k2", "v2", 5]`, `"ok"`},
		{`["write", 0, "X", "k", "v3", 4]`, `"error: stale token"`},
		{`["read", 0, "X", "k"]`, `"v1"`},
		{`["read", 0, "X", "nope"]`, `null`},
		{`["read", 0, "Y", "k"]`, `null`},
		{`["write", 0, "X", "k", "v4", 7]`, `"ok"`},
		{`["read", 0, "X", "k"]`, `"v4"`},
		{`["inspect", 0, "X"]`, `{"holders": [], "queue": []}`},
	})
}

func TestDeadlocks(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 0, "a", "A", 100]`, `["granted", 1, 100]`},
		{`["acquire", 0, "b", "B", 100]`, `["granted", 1, 100]`},
		{`["acquire", 0, "a", "B", 100]`, `["queued", 1]`},
		// The requester is the youngest: it alone is aborted.
		{`["acquire", 1, "b", "A", 100]`, `["deadlock", ["b"]]`},
		{`["status", 1, "b"]`, nobody},
		{`["status", 1, "a"]`, `{"age": 1, "holds": [["A", "exclusive", 1, 100], ["B", "exclusive", 2, 101]], "waiting": null}`},
		// Re-registered with a fresh, larger age.
		{`["acquire", 2, "b", "C", 100]`, `["granted", 1, 102]`},
		{`["status", 2, "b"]`, `{"age": 3, "holds": [["C", "exclusive", 1, 102]], "waiting": null}`},
		// Victims go youngest first, C recomputed after each abort: p (5)
		// breaks b -> p -> v -> b, then v (4) is still on b -> v -> b. v's
		// locks are released ("Z" before "a"), granting both at the acquire's ts.
		{`["acquire", 3, "v", "a", 100]`, `["granted", 1, 103]`},
		{`["acquire", 3, "v", "Z", 100]`, `["granted", 1, 103]`},
		{`["acquire", 3, "p", "a", 50]`, `["queued", 1]`},
		{`["acquire", 3, "q", "Z", 50]`, `["queued", 1]`},
		{`["acquire", 4, "v", "C", 100]`, `["queued", 1]`},
		{`["acquire", 5, "b", "a", 100]`, `["granted", 2, 105, ["p", "v"]]`},
		{`["inspect", 5, "a"]`, `{"holders": [["b", "exclusive", 2, 105]], "queue": []}`},
		{`["inspect", 5, "Z"]`, `{"holders": [["q", "exclusive", 2, 55]], "queue": []}`},
		{`["inspect", 5, "C"]`, `{"holders": [["b", "exclusive", 1, 102]], "queue": []}`},
		{`["status", 5, "p"]`, nobody},
		// A waiter ahead closes a cycle too: C = {e, f, g}; g, then f.
		{`["acquire", 6, "e", "E", 100]`, `["granted", 1, 106]`},
		{`["acquire", 6, "f", "F", 100]`, `["granted", 1, 106]`},
		{`["acquire", 6, "g", "F", 100]`, `["queued", 1]`},
		{`["acquire", 6, "f", "E", 100]`, `["queued", 1]`},
		{`["acquire", 7, "e", "F", 100]`, `["granted", 2, 107, ["g", "f"]]`},
		// Queued, with the victims appended, when the aborts do not free the lock.
		{`["acquire", 8, "h", "H", 100]`, `["granted", 1, 108]`},
		{`["acquire", 8, "i", "I", 100, "shared"]`, `["granted", 1, 108]`},
		{`["acquire", 8, "j", "I", 100, "shared"]`, `["granted", 2, 108]`},
		{`["acquire", 8, "i", "H", 100]`, `["queued", 1]`},
		{`["acquire", 9, "h", "I", 100]`, `["queued", 1, ["i"]]`},
		{`["inspect", 9, "I"]`, `{"holders": [["j", "shared", 2, 108]], "queue": [["h", "exclusive"]]}`},
		{`["inspect", 9, "H"]`, `{"holders": [["h", "exclusive", 1, 108]], "queue": []}`},
	})
}

func TestRepeat(t *testing.T) {
	runTable(t, []step{
		{`["repeat", 0, ["acquire", "job{i}", "L{i%2}", 10], 4, 1]`, `{"ops": 4, "results": {"granted": 2, "queued": 2}}`},
		{`["status", 3, "job3"]`, `{"age": 4, "holds": [], "waiting": "L1"}`},
		{`["repeat", 3, 2, 0, ["read", "L{i}", "k"]]`, `{"ops": 2, "results": {"other": 2}}`},
		// Whole-repeat errors.
		{`["repeat", 4, ["repeat", 1, 1], 1, 1]`, invalid},
		{`["repeat", 4, ["acquire", "a{i%0}", "L", 1], 1, 1]`, invalid},
		{`["repeat", 4, ["acquire", "a{i+5%000}", "L", 1], 1, 1]`, invalid},
		{`["repeat", 4, ["acquire", "a{i+99999999999999999999}", "L", 1], 1, 1]`, invalid},
		{`["repeat", 4, [], 1, 1]`, invalid},
		{`["repeat", 4, ["nope"], 1, 1]`, invalid},
		{`["repeat", 4, [5], 1, 1]`, invalid},
		{`["repeat", 4, ["read", "L", "k"], 0, 1]`, invalid},
		{`["repeat", 4, ["read", "L", "k"], 100001, 1]`, invalid},
		{`["repeat", 4, ["read", "L", "k"], 1, -1]`, invalid},
		{`["repeat", 4, ["read", "L", "k"], 1.0, 1]`, invalid},
		{`["repeat", 4, 1, 1, 1]`, invalid},
		{`["repeat", 4, ["read", "L", "k"], 1]`, invalid},
		// Time advanced to 4 although the repeats failed.
		{`["read", 3, "L", "k"]`, invalid},
		// Per-run errors are tallied; a {i%0} inside a nested array is untouched.
		{`["repeat", 5, ["acquire", "c", "M{i}", 0], 2, 0]`, `{"ops": 2, "results": {"error: invalid ttl": 2}}`},
		{`["repeat", 5, ["status", ["{i%0}"]], 1, 0]`, `{"ops": 1, "results": {"error: invalid arguments": 1}}`},
		{`["repeat", 5, ["acquire"], 1, 0]`, `{"ops": 1, "results": {"error: invalid arguments": 1}}`},
		// Placeholder forms, observed through the store.
		{`["repeat", 6, ["write", "P", "k{i}", "{i}|{i+3}|{i%2}|{i+3%2}|{i-1}|{ i}|{I}|{i+}|{j}|{{i}}|{i+007%010}|{i+9223372036854775807}|{i", 1], 2, 0]`, `{"ops": 2, "results": {"ok": 2}}`},
		{`["read", 6, "P", "k0"]`, `"0|3|0|1|{i-1}|{ i}|{I}|{i+}|{j}|{0}|7|9223372036854775807|{i"`},
		{`["read", 6, "P", "k1"]`, `"1|4|1|0|{i-1}|{ i}|{I}|{i+}|{j}|{1}|8|9223372036854775808|{i"`},
		// Run times: ts + i*step, and time ends at the last run's ts.
		{`["repeat", 10, ["acquire", "t{i}", "T{i}", 1], 3, 5]`, `{"ops": 3, "results": {"granted": 3}}`},
		{`["status", 20, "t2"]`, `{"age": 7, "holds": [["T2", "exclusive", 1, 21]], "waiting": null}`},
		{`["status", 19, "t2"]`, invalid},
		// A read's value is tallied under the value itself.
		{`["repeat", 20, ["read", "P", "k{i}"], 2, 0]`, `{"ops": 2, "results": {"0|3|0|1|{i-1}|{ i}|{I}|{i+}|{j}|{0}|7|9223372036854775807|{i": 1, "1|4|1|0|{i-1}|{ i}|{I}|{i+}|{j}|{1}|8|9223372036854775808|{i": 1}}`},
		// The last run's ts must fit in an int64; time still advances.
		{`["repeat", 9223372036854775800, ["status", "x"], 3, 5]`, invalid},
		{`["status", 9223372036854775799, "x"]`, invalid},
		{`["repeat", 9223372036854775800, ["status", "x"], 2, 7]`, `{"ops": 2, "results": {"other": 2}}`},
	})
}

func TestRepeatAbortedTally(t *testing.T) {
	runTable(t, []step{
		{`["acquire", 0, "a", "X0", 100]`, `["granted", 1, 100]`},
		{`["acquire", 0, "b", "B", 100]`, `["granted", 1, 100]`},
		{`["acquire", 0, "b", "X0", 100]`, `["queued", 1]`},
		// a closes the cycle; b is younger and goes, granting B to a.
		{`["repeat", 1, ["acquire", "a", "B", 100], 1, 0]`, `{"ops": 1, "results": {"granted": 1, "aborted": 1}}`},
		{`["acquire", 2, "c", "C", 100]`, `["granted", 1, 102]`},
		{`["acquire", 2, "a", "C", 100]`, `["queued", 1]`},
		// Run 0: c is the youngest on c -> a -> c and aborts itself.
		{`["repeat", 3, ["acquire", "c", "X{i}", 100], 2, 0]`, `{"ops": 2, "results": {"deadlock": 1, "granted": 1, "aborted": 1}}`},
		{`["status", 3, "a"]`, `{"age": 1, "holds": [["B", "exclusive", 2, 101], ["C", "exclusive", 2, 103], ["X0", "exclusive", 1, 100]], "waiting": null}`},
		{`["status", 3, "c"]`, `{"age": 4, "holds": [["X1", "exclusive", 1, 103]], "waiting": null}`},
	})
}

// TestLoadDrive runs the contract's scale drives (section 6); the model only
// has to get through them in seconds, not in the engine's time.
func TestLoadDrive(t *testing.T) {
	drives := []string{
		`[["repeat", 0, ["acquire", "job{i}", "L{i%3000}", 60], 20000, 1],
		  ["repeat", 20000, ["renew", "job{i}", "L{i%3000}", 60], 20000, 0],
		  ["repeat", 20000, ["write", "L{i%3000}", "k{i%7}", "v{i}", 1], 20000, 0],
		  ["repeat", 20000, ["release", "job{i}", "L{i%3000}"], 20000, 0]]`,
		`[["repeat", 0, ["acquire", "c{i}", "Q{i%10}", 86400], 20000, 0],
		  ["repeat", 0, ["release", "c{i}", "Q{i%10}"], 20000, 0]]`,
		`[["repeat", 0, ["acquire", "r{i}", "S", 86400, "shared"], 2000, 0],
		  ["acquire", 0, "w", "S", 10],
		  ["repeat", 0, ["acquire", "s{i}", "S", 86400, "shared"], 2000, 0],
		  ["inspect", 86400, "S"]]`,
		`[["repeat", 0, ["acquire", "d{i}", "D{i}", 100], 3000, 0],
		  ["repeat", 0, ["acquire", "d{i}", "D{i+1%3000}", 100], 3000, 0]]`,
	}
	for i, drive := range drives {
		var ops []json.RawMessage
		if err := json.Unmarshal([]byte(drive), &ops); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		results := Run(ops)
		out, _ := json.Marshal(results)
		t.Logf("drive %d: %v: %.300s", i, time.Since(start), out)
		for _, r := range results {
			if s, ok := r.(string); ok && strings.HasPrefix(s, "error") {
				t.Errorf("drive %d: %s", i, s)
			}
		}
	}
}

// checkInvariants verifies the state the rules promise between operations.
func (m *Model) checkInvariants() error {
	queued := map[string]string{}
	held := map[string]int{}
	for name, l := range m.locks {
		if l.name != name {
			return fmt.Errorf("lock %q filed as %q", l.name, name)
		}
		if m.held[l] != (len(l.holders) > 0) {
			return fmt.Errorf("lock %q missing from or stale in held", name)
		}
		exclusive := 0
		for i, h := range l.holders {
			if h.lock != l {
				return fmt.Errorf("lease of %q on %q points elsewhere", h.client, name)
			}
			// A lease granted at the very last instant lapses there already;
			// the next operation retires it (contract-notes).
			if h.expiresAt <= m.now && h.expiresAt != math.MaxInt64 {
				return fmt.Errorf("lease of %q on %q lapsed at %d, now %d (L1)", h.client, name, h.expiresAt, m.now)
			}
			if h.token < 1 || h.token > l.counter || (i > 0 && h.token <= l.holders[i-1].token) {
				return fmt.Errorf("holders of %q out of token order (S4, L5)", name)
			}
			if h.mode == modeExclusive {
				exclusive++
			}
			if h.expiresAt < m.nextExpiry {
				return fmt.Errorf("nextExpiry %d above a lease's %d", m.nextExpiry, h.expiresAt)
			}
			c := m.clients[h.client]
			if c == nil || c.holds[name] != h {
				return fmt.Errorf("lease of %q on %q not recorded on the client", h.client, name)
			}
			held[h.client]++
		}
		if exclusive > 0 && len(l.holders) > 1 {
			return fmt.Errorf("lock %q has an exclusive holder among others (S1)", name)
		}
		if len(l.queue) > 0 && compatible(l, l.queue[0].mode) {
			return fmt.Errorf("lock %q has a grantable queue head (S3)", name)
		}
		for i, w := range l.queue {
			if i > 0 && l.queue[i-1].seq >= w.seq {
				return fmt.Errorf("queue of %q out of order", name)
			}
			if prev, dup := queued[w.client]; dup {
				return fmt.Errorf("%q waits for %q and %q (L8)", w.client, prev, name)
			}
			queued[w.client] = name
			c := m.clients[w.client]
			if w.lock != l || c == nil || c.waiting != w {
				return fmt.Errorf("waiter %q on %q not recorded on the client", w.client, name)
			}
			if c.holds[name] != nil {
				return fmt.Errorf("%q both holds and awaits %q", w.client, name)
			}
		}
	}
	for l := range m.held {
		if m.locks[l.name] != l {
			return fmt.Errorf("held lock %q not in the lock table", l.name)
		}
	}
	ages := map[int64]string{}
	for name, c := range m.clients {
		if c.age < 1 || c.age > m.lastAge {
			return fmt.Errorf("client %q has age %d of %d", name, c.age, m.lastAge)
		}
		if other, dup := ages[c.age]; dup {
			return fmt.Errorf("clients %q and %q share age %d (D1)", name, other, c.age)
		}
		ages[c.age] = name
		if len(c.holds) != held[name] {
			return fmt.Errorf("client %q records %d holds, locks show %d", name, len(c.holds), held[name])
		}
		if c.waiting != nil && queued[name] != c.waiting.lock.name {
			return fmt.Errorf("client %q waits for %q but is not in its queue", name, c.waiting.lock.name)
		}
	}
	return nil
}

// randomOps draws a replay over a few clients and locks, with small ttls and
// time steps so that lapses, hand-overs, shared grants and deadlocks all
// happen often.
func randomOps(r *rand.Rand, n int) []json.RawMessage {
	clients := []string{"a", "b", "c", "d", "e", "f"}
	locks := []string{"L", "M", "N", "O"}
	ops := make([]json.RawMessage, 0, n)
	ts := int64(0)
	for range n {
		ts += int64(r.IntN(3))
		c, l := clients[r.IntN(len(clients))], locks[r.IntN(len(locks))]
		var op any
		switch k := r.IntN(10); {
		case k < 5:
			mode := []string{"shared", "exclusive"}[r.IntN(2)]
			op = []any{"acquire", ts, c, l, 1 + r.IntN(12), mode}
		case k < 7:
			op = []any{"release", ts, c, l}
		case k < 8:
			op = []any{"renew", ts, c, l, 1 + r.IntN(12)}
		case k < 9:
			op = []any{"write", ts, l, "k", c, 1 + r.IntN(6)}
		default:
			op = []any{"inspect", ts, l}
		}
		data, _ := json.Marshal(op)
		ops = append(ops, data)
	}
	return ops
}

// naiveCycle is D4.1 on D2's literal edges, with every pair of waiters.
func (m *Model) naiveCycle(r string) map[string]bool {
	edges := map[string][]string{}
	for _, l := range m.locks {
		for i, w := range l.queue {
			for _, h := range l.holders {
				edges[w.client] = append(edges[w.client], h.client)
			}
			for _, ahead := range l.queue[:i] {
				edges[w.client] = append(edges[w.client], ahead.client)
			}
		}
	}
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		stack := []string{from}
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, y := range edges[x] {
				if !seen[y] {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		return seen
	}
	c := map[string]bool{}
	for x := range reach(r) {
		if reach(x)[r] {
			c[x] = true
		}
	}
	return c
}

// TestCycleSearchMatchesNaive checks the prefix/suffix searches of D4.1
// against the literal wait-for graph. States at rest have no cycles (D4
// resolved them), so each random state is probed by queueing every idle
// client on every lock it could wait for, comparing C for every waiter, and
// taking the entry out again.
func TestCycleSearchMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cycles := 0
	for range 300 {
		m := New()
		for _, op := range randomOps(r, 60) {
			m.Step(op)
			if err := m.checkInvariants(); err != nil {
				t.Fatalf("after %s: %v", op, err)
			}
			for probe, pc := range m.clients {
				if pc.waiting != nil {
					continue
				}
				for _, l := range m.locks {
					if pc.holds[l.name] != nil || (len(l.queue) == 0 && compatible(l, modeExclusive)) {
						continue
					}
					m.enqueue(l, probe, modeExclusive, 1)
					for name, c := range m.clients {
						if c.waiting == nil {
							continue
						}
						got, want := m.cycleMembers(name), m.naiveCycle(name)
						if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
							t.Fatalf("after %s, %s queued on %s: C(%s) = %v, naive %v", op, probe, l.name, name, got, want)
						}
						if len(want) > 0 {
							cycles++
						}
					}
					m.removeWaiter(pc)
				}
			}
		}
	}
	if cycles < 1000 {
		t.Errorf("only %d cycles probed", cycles)
	}
}

// TestLookingChangesNothing replays random operations twice, the second time
// with a read at every intermediate instant: what the rules decide depends on
// when leases ended, never on when somebody looked (L3).
func TestLookingChangesNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		ops := randomOps(r, 80)
		plain := Run(ops)
		m := New()
		var last int64
		for i, op := range ops {
			var arr []any
			_ = json.Unmarshal(op, &arr)
			ts := int64(arr[1].(float64))
			for tick := last + 1; i > 0 && tick < ts; tick++ {
				m.Step(json.RawMessage(fmt.Sprintf(`["read", %d, "x", "y"]`, tick)))
			}
			last = ts
			got, _ := json.Marshal(m.Step(op))
			want, _ := json.Marshal(plain[i])
			if !bytes.Equal(got, want) {
				t.Fatalf("op %d %s: looked-at run %s, plain run %s", i, op, got, want)
			}
		}
	}
}
