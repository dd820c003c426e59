package main

import (
	"os"
	"regexp"
	"testing"
)

// TestConsoleDocFlags: every flag docs/console.md names is one of serve's.
func TestConsoleDocFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	serve := newServeCmd()
	ms := regexp.MustCompile("`--([a-z][a-z-]*)").FindAllSubmatch(doc, -1)
	if len(ms) == 0 {
		t.Fatal("docs/console.md names no flag")
	}
	for _, m := range ms {
		if serve.Flags().Lookup(string(m[1])) == nil {
			t.Errorf("docs/console.md names --%s, which serve does not have", m[1])
		}
	}
}
