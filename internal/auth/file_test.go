package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	hashA = HashToken("token-a")
	hashB = HashToken("token-b")
)

func TestParseGood(t *testing.T) {
	ps, err := Parse([]byte(`{"principals": [
	  {"name": "etl", "token_sha256": "` + hashA + `", "clients": ["etl-*"], "role": "client"},
	  {"name": "ops", "token_sha256": "` + strings.ToUpper(hashB) + `", "role": "admin"}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "etl" || ps[0].Role != RoleClient || len(ps[0].Clients) != 1 || ps[1].Role != RoleAdmin {
		t.Errorf("parsed %+v", ps)
	}
	if HashToken("abc") != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashToken(abc) = %s, want the SHA-256 in hex", HashToken("abc"))
	}
}

// TestParseBad: every problem stops the load with an error that names it,
// and the principal it is in.
func TestParseBad(t *testing.T) {
	p := func(fields string) string { return `{"principals": [` + fields + `]}` }
	etl := `{"name": "etl", "token_sha256": "` + hashA + `", "clients": ["etl-*"], "role": "client"}`
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"not json", `{"principals": [`, []string{"not an auth file"}},
		{"not an object", `[]`, []string{"not an auth file"}},
		{"unknown top-level field", `{"principals": [` + etl + `], "users": []}`, []string{"unknown field", "users"}},
		{"trailing data", p(etl) + ` {}`, []string{"unexpected data"}},
		{"no principals", `{"principals": []}`, []string{"no principals"}},
		{"missing principals", `{}`, []string{"no principals"}},
		{"unknown principal field", p(`{"name": "etl", "token": "x", "token_sha256": "` + hashA + `", "clients": ["etl-*"], "role": "client"}`),
			[]string{`principal 1 ("etl")`, "unknown field", "token"}},
		{"mistyped clients", p(`{"name": "etl", "token_sha256": "` + hashA + `", "clients": "etl-*", "role": "client"}`),
			[]string{`principal 1 ("etl")`, "clients"}},
		{"missing name", p(`{"token_sha256": "` + hashA + `", "role": "admin"}`), []string{"principal 1", `"name" is missing`}},
		{"short hash", p(`{"name": "ops", "token_sha256": "abc", "role": "admin"}`), []string{`principal 1 ("ops")`, "64 hex digits"}},
		{"missing hash", p(`{"name": "ops", "role": "admin"}`), []string{`principal 1 ("ops")`, "token_sha256"}},
		{"bad hex", p(`{"name": "ops", "token_sha256": "` + strings.Repeat("g", 64) + `", "role": "admin"}`), []string{`principal 1 ("ops")`, "not hex"}},
		{"empty token hash", p(`{"name": "ops", "token_sha256": "` + HashToken("") + `", "role": "admin"}`), []string{`principal 1 ("ops")`, "empty token"}},
		{"duplicate name", p(etl + `, {"name": "etl", "token_sha256": "` + hashB + `", "role": "admin"}`), []string{`principal 2 ("etl")`, "principal 1"}},
		{"duplicate token", p(etl + `, {"name": "ops", "token_sha256": "` + strings.ToUpper(hashA) + `", "role": "admin"}`), []string{`principal 2 ("ops")`, `same token_sha256 as principal "etl"`}},
		{"unknown role", p(`{"name": "ops", "token_sha256": "` + hashB + `", "role": "root"}`), []string{`principal 1 ("ops")`, `unknown role "root"`}},
		{"missing role", p(`{"name": "ops", "token_sha256": "` + hashB + `"}`), []string{`principal 1 ("ops")`, `"role" is missing`}},
		{"client without clients", p(`{"name": "etl", "token_sha256": "` + hashA + `", "role": "client"}`), []string{`principal 1 ("etl")`, `needs "clients"`}},
		{"client with empty clients", p(`{"name": "etl", "token_sha256": "` + hashA + `", "clients": [], "role": "client"}`), []string{`principal 1 ("etl")`, `needs "clients"`}},
		{"empty pattern", p(`{"name": "etl", "token_sha256": "` + hashA + `", "clients": [""], "role": "client"}`), []string{`principal 1 ("etl")`, "empty pattern"}},
		{"bad pattern", p(`{"name": "etl", "token_sha256": "` + hashA + `", "clients": ["etl-["], "role": "client"}`), []string{`principal 1 ("etl")`, `"etl-["`, "malformed"}},
		{"clients on a reader", p(`{"name": "dash", "token_sha256": "` + hashB + `", "clients": ["*"], "role": "reader"}`), []string{`principal 1 ("dash")`, `only for role "client"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("Parse(%s) succeeded, want an error", tc.file)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "auth.json")
	if _, err := LoadFile(name); err == nil || !strings.Contains(err.Error(), "auth file") {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(name, []byte(`{"principals": [{"name": "ops", "token_sha256": "x", "role": "admin"}]}`), 0o644)
	if _, err := LoadFile(name); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), `"ops"`) {
		t.Errorf("bad file: %v, want the file's name and the principal's", err)
	}
}
