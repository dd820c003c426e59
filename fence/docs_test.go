package fence_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasekeeper/leasekeeper/fence"
)

// docBlocks returns docs/fencing.md's fenced blocks by their info string
// ("sql postgres", "go", ...), in order.
func docBlocks(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "fencing.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks := map[string][]string{}
	var info string
	var cur []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, info, cur = true, strings.TrimPrefix(line, "```"), nil
		case in && line == "```":
			in = false
			blocks[info] = append(blocks[info], strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// TestDocSQL: the SQL docs/fencing.md gives users of other languages is
// the SQL that Install and Check run, which the interleaving test tests.
func TestDocSQL(t *testing.T) {
	blocks := docBlocks(t)
	for _, d := range []fence.Dialect{fence.Postgres, fence.SQLite, fence.MySQL} {
		if got := blocks["sql "+string(d)]; len(got) != 1 || got[0] != fence.InstallSQL(d) {
			t.Errorf("docs/fencing.md's ```sql %s block is not InstallSQL(%s):\n%s\nwant:\n%s", d, d, got, fence.InstallSQL(d))
		}
		want := strings.Join(fence.CheckSQL(d), ";\n") + ";\n"
		if got := blocks["sql "+string(d)+"-check"]; len(got) != 1 || got[0] != want {
			t.Errorf("docs/fencing.md's ```sql %s-check block is not CheckSQL(%s):\n%s\nwant:\n%s", d, d, got, want)
		}
	}
}

// TestDocGo: docs/fencing.md's Go code is the code Example runs.
func TestDocGo(t *testing.T) {
	blocks := docBlocks(t)
	if len(blocks["go"]) != 1 {
		t.Fatalf("docs/fencing.md has %d ```go blocks, want 1", len(blocks["go"]))
	}
	b, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	start := strings.Index(src, "// The code of docs/fencing.md, \"From Go\", from here:\n")
	end := strings.Index(src, "\t// to here.\n")
	if start < 0 || end < start {
		t.Fatal("example_test.go lost its markers")
	}
	var body []string
	for _, line := range strings.Split(src[start:end], "\n")[1:] {
		body = append(body, strings.TrimPrefix(line, "\t"))
	}
	if got, want := blocks["go"][0], strings.Join(body, "\n"); got != want {
		t.Errorf("docs/fencing.md's Go code differs from Example's:\n%s\nwant:\n%s", got, want)
	}
}
