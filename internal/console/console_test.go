package console_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/console"
)

// TestNoHTMLFromData: the script builds the page from text nodes and
// attributes only (names are chosen by whoever calls the API), and the page
// has no inline script, style or handler, which the Content-Security-
// Policy would refuse anyway. The browser tests show the same from the
// DOM; this one needs no browser.
func TestNoHTMLFromData(t *testing.T) {
	js := string(console.File("app.js"))
	code := regexp.MustCompile(`(?m)^\s*//.*$`).ReplaceAllString(js, "")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute('style'"} {
		if strings.Contains(code, sink) {
			t.Errorf("app.js uses %s: build elements with el() and text nodes instead", sink)
		}
	}
	html := string(console.File("index.html"))
	if m := regexp.MustCompile(`<script(?:\s[^>]*)?>`).FindAllString(html, -1); len(m) != 1 || !strings.Contains(m[0], `src="/console/app.js"`) {
		t.Errorf("index.html's scripts are %q, want the one of /console/app.js", m)
	}
	if regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=`).MatchString(html) {
		t.Errorf("index.html has inline style or an inline event handler")
	}
}
