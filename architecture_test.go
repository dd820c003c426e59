package leasekeeper_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The module's import path, as go.mod has it.
const module = "github.com/leasekeeper/leasekeeper"

// TestArchitectureImports: docs/architecture.md's table lists every package
// of the module, and each imports (outside its tests) only what its row
// allows. A package added, or an import that crosses a layer, fails here
// until the page says so.
func TestArchitectureImports(t *testing.T) {
	rules := importRules(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := relative(fields[0])
		seen[pkg] = true
		allowed, listed := rules[pkg]
		if !listed {
			t.Errorf("package %s is not in docs/architecture.md's table", pkg)
			continue
		}
		if allowed == nil { // anything
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if dep := relative(imp); !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow it", pkg, dep)
			}
		}
	}
	for pkg := range rules {
		if !seen[pkg] {
			t.Errorf("docs/architecture.md names package %s, which does not exist", pkg)
		}
	}
}

// relative is a package's path in the module, "." for the root.
func relative(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// importRules reads the table of docs/architecture.md: each package, and
// what it may import (nil for anything).
func importRules(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	rules := map[string][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| package |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "|---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(rules) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("a row of the package table without three cells: %q", line)
		}
		name := code.FindStringSubmatch(cells[0])
		if name == nil {
			t.Fatalf("a row of the package table without a package: %q", line)
		}
		may := strings.TrimSpace(cells[2])
		switch may {
		case "anything":
			rules[name[1]] = nil
		case "nothing":
			rules[name[1]] = []string{}
		default:
			deps := []string{}
			for _, m := range code.FindAllStringSubmatch(may, -1) {
				deps = append(deps, m[1])
			}
			rules[name[1]] = deps
		}
	}
	if len(rules) == 0 {
		t.Fatal("docs/architecture.md has no package table")
	}
	return rules
}

// TestArchitectureNames: every file, folder and file.go:Function that
// docs/architecture.md names exists, so that the page a newcomer reads
// first does not send them where nothing is.
func TestArchitectureNames(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	checked := 0
	for _, m := range code.FindAllStringSubmatch(string(doc), -1) {
		name := m[1]
		if strings.ContainsAny(name, " (") || !strings.Contains(name, "/") && !strings.Contains(name, ".go") {
			continue // code, not a path
		}
		path, fn, _ := strings.Cut(name, ":")
		info, err := os.Stat(filepath.FromSlash(path))
		if err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist", path)
			continue
		}
		checked++
		if fn == "" {
			continue
		}
		if info.IsDir() {
			t.Errorf("docs/architecture.md names %s in %s, a folder", fn, path)
			continue
		}
		src, _ := os.ReadFile(path)
		recv, method, isMethod := strings.Cut(fn, ".")
		re := `(?m)^func ` + regexp.QuoteMeta(fn) + `[\[(]`
		if isMethod {
			re = `(?m)^func \(\w+ \*?` + regexp.QuoteMeta(recv) + `\) ` + regexp.QuoteMeta(method) + `\(`
		}
		if !regexp.MustCompile(re).Match(src) {
			t.Errorf("docs/architecture.md names %s, which %s does not define", fn, path)
		}
	}
	if checked < 20 {
		t.Errorf("only %d names checked: the page's paths are not being found", checked)
	}
}

// TestArchitectureEngineFace: engine.Engine's exported methods are the ones
// docs/architecture.md lists, and at most 25 of them: the face the HTTP
// server sees stays one method per operation, and small.
func TestArchitectureEngineFace(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("internal", "engine", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var methods []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.Name == "Engine" {
				methods = append(methods, fn.Name.Name)
			}
		}
	}
	if len(methods) > 25 {
		t.Errorf("engine.Engine has %d exported methods, more than 25: %v", len(methods), methods)
	}
	doc, err := os.ReadFile(filepath.Join("docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The paragraph that names the face, from its first method to its count.
	text := string(doc)
	start := strings.Index(text, "whose exported face is")
	end := strings.Index(text[max(start, 0):], " in all")
	if start < 0 || end < 0 {
		t.Fatal("docs/architecture.md has no paragraph \"whose exported face is ... in all\"")
	}
	para := text[start : start+end]
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z][A-Za-z]*)`").FindAllStringSubmatch(para, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(methods)
	slices.Sort(listed)
	if !slices.Equal(methods, listed) {
		t.Errorf("docs/architecture.md lists Engine's methods %v; it has %v", listed, methods)
	}
	if want := fmt.Sprintf(": %d", len(methods)); !strings.HasSuffix(para, want) {
		t.Errorf("docs/architecture.md counts Engine's methods as %q; it has %d", para[max(0, len(para)-6):], len(methods))
	}
}
