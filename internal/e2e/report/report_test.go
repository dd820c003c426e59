package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// TestSaveHistory: the first line says when the history started and how
// much it holds; the operations and faults follow by time, an operation at
// its call, as one reads a failed run.
func TestSaveHistory(t *testing.T) {
	h := history.New()
	h.Record(history.Op{Input: history.Input{Kind: history.Acquire, Client: "a", Lock: "L"}, Call: 30, Return: 40})
	h.RecordFault(history.Fault{At: 10, Kind: "kill"})
	h.Record(history.Op{Input: history.Input{Kind: history.Release, Client: "a", Lock: "L"}, Call: 20, Return: 50})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := SaveHistory(path, h); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), b)
	}
	var first struct {
		Start       string
		Ops, Faults int
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Ops != 2 || first.Faults != 1 || first.Start == "" {
		t.Errorf("first line %s (%v)", lines[0], err)
	}
	var order []string
	for _, l := range lines[1:] {
		var v struct {
			Fault string
			Input struct{ Kind string }
		}
		json.Unmarshal([]byte(l), &v)
		order = append(order, v.Fault+v.Input.Kind)
	}
	if got, want := strings.Join(order, " "), "kill release acquire"; got != want {
		t.Errorf("in order %q, want %q:\n%s", got, want, b)
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server-0.1.log")
	os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o600)
	if got := Tail(path, 2); got != "two\nthree" {
		t.Errorf("Tail(2) = %q", got)
	}
	if got := Tail(path, 10); got != "one\ntwo\nthree" {
		t.Errorf("Tail(10) = %q", got)
	}
}
