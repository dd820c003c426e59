package apitest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// The tests of this file keep docs/openapi.json equal to the Go types of
// the root package: a field added to a result or a request, a new error
// code, mode or outcome must be added to the document too.

// rawDoc is the document as plain JSON.
func rawDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(lk.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// at follows a JSON pointer ("#/components/schemas/Holder") in doc.
func at(t *testing.T, doc map[string]any, pointer string) map[string]any {
	t.Helper()
	var cur any = doc
	for _, p := range strings.Split(strings.TrimPrefix(pointer, "#/"), "/") {
		p = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %q is not in an object", pointer, p)
		}
		if cur, ok = m[p]; !ok {
			t.Fatalf("%s: no %q", pointer, p)
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", pointer)
	}
	return m
}

// resolve follows node's $ref, if any.
func resolve(t *testing.T, doc, node map[string]any) map[string]any {
	t.Helper()
	if ref, ok := node["$ref"].(string); ok {
		return at(t, doc, ref)
	}
	return node
}

// properties returns the property names of a component schema: of its
// oneOf, anyOf and allOf branches too.
func properties(t *testing.T, doc, schema map[string]any) []string {
	t.Helper()
	set := map[string]bool{}
	var walk func(s map[string]any)
	walk = func(s map[string]any) {
		s = resolve(t, doc, s)
		props, _ := s["properties"].(map[string]any)
		for name := range props {
			set[name] = true
		}
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			branches, _ := s[k].([]any)
			for _, b := range branches {
				walk(b.(map[string]any))
			}
		}
	}
	walk(schema)
	return sorted(set)
}

func sorted(set map[string]bool) []string {
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields returns the JSON names of typ's fields; with lower, a field
// without a json tag counts by its lower-cased name (LocksRequest's).
func jsonFields(typ reflect.Type, lower bool) []string {
	set := map[string]bool{}
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			continue
		case name == "" && lower:
			name = strings.ToLower(f.Name)
		case name == "":
			name = f.Name
		}
		set[name] = true
	}
	return sorted(set)
}

// queryParams returns the query parameters of GET path.
func queryParams(t *testing.T, doc map[string]any, path string) []string {
	t.Helper()
	op := at(t, doc, "#/paths/"+strings.ReplaceAll(path, "/", "~1")+"/get")
	set := map[string]bool{}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		p := resolve(t, doc, p.(map[string]any))
		if p["in"] == "query" {
			set[p["name"].(string)] = true
		}
	}
	return sorted(set)
}

// TestSchemasMatchTypes: the JSON field names of each result and request
// type are the properties of its component schema (or the query
// parameters of its GET operation).
func TestSchemasMatchTypes(t *testing.T) {
	doc := rawDoc(t)
	schemas := []struct {
		typ    any
		schema string
		extra  []string // properties the document has beyond the type's fields
		// left are the type's fields this schema's answers leave out: one
		// Go type serves every role of a lease (lk.Holder).
		left []string
	}{
		{lk.AcquireResult{}, "AcquireResult", nil, nil}, // the union of its oneOf
		{lk.RenewResult{}, "RenewResult", nil, nil},
		{lk.ReleaseResult{}, "ReleaseResult", nil, nil},
		{lk.RevokeResult{}, "RevokeResult", nil, nil},
		{lk.WriteResult{}, "WriteResult", nil, nil},
		{lk.UnfenceResult{}, "UnfenceResult", nil, nil},
		{lk.ReadResult{}, "ReadResult", nil, nil},
		{lk.InspectResult{}, "InspectResult", nil, nil},
		{lk.Holder{}, "Holder", nil, []string{"lock"}},
		{lk.Waiter{}, "Waiter", nil, nil},
		{lk.StatusResult{}, "StatusResult", nil, nil}, // its MarshalJSON writes statusWire, of the same names
		{lk.Holder{}, "Hold", nil, []string{"client"}},
		{lk.Holder{}, "GraphHold", nil, nil},
		{lk.WaitingFor{}, "WaitingFor", nil, nil},
		{lk.LockSummary{}, "LockSummary", nil, nil},
		{lk.LocksResult{}, "LocksResult", nil, nil},
		{lk.GrantRecord{}, "GrantRecord", nil, nil},
		{lk.HistoryResult{}, "HistoryResult", nil, nil},
		{lk.HealthResult{}, "HealthResult", nil, nil},
		{lk.ReadyResult{}, "ReadyResult", nil, nil},

		// wait is the HTTP API's, not the contract's: AcquireRequest has no
		// field for it.
		{lk.AcquireRequest{}, "AcquireRequest", []string{"wait"}, nil},
		{lk.RenewRequest{}, "RenewRequest", nil, nil},
		{lk.ReleaseRequest{}, "ReleaseRequest", nil, nil},
		{lk.RevokeRequest{}, "RevokeRequest", nil, nil},
		{lk.WriteRequest{}, "WriteRequest", nil, nil},
		{lk.UnfenceRequest{}, "UnfenceRequest", nil, nil},
	}
	for _, s := range schemas {
		typ := reflect.TypeOf(s.typ)
		want := slices.DeleteFunc(jsonFields(typ, false), func(f string) bool { return slices.Contains(s.left, f) })
		want = append(want, s.extra...)
		slices.Sort(want)
		got := properties(t, doc, at(t, doc, "#/components/schemas/"+s.schema))
		if !slices.Equal(got, want) {
			t.Errorf("components/schemas/%s has properties %v; lk.%s has JSON fields %v (plus %v, less %v)",
				s.schema, got, typ.Name(), jsonFields(typ, false), s.extra, s.left)
		}
	}

	gets := []struct {
		typ  any
		path string
	}{
		{lk.InspectRequest{}, "/v1/inspect"},
		{lk.StatusRequest{}, "/v1/status"},
		{lk.ReadRequest{}, "/v1/read"},
		{lk.LocksRequest{}, "/v1/locks"},
		{lk.HistoryRequest{}, "/v1/history"},
	}
	for _, g := range gets {
		typ := reflect.TypeOf(g.typ)
		want := jsonFields(typ, true)
		if got := queryParams(t, doc, g.path); !slices.Equal(got, want) {
			t.Errorf("GET %s has query parameters %v; lk.%s has fields %v", g.path, got, typ.Name(), want)
		}
	}
}

// constants returns the string constants of type typ declared in the root
// package's files.
func constants(t *testing.T, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the root package's files: %v", err)
	}
	set := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						set[s] = true
					}
				}
			}
		}
	}
	if len(set) == 0 {
		t.Fatalf("no constant of type %s in the root package", typ)
	}
	return sorted(set)
}

func enum(t *testing.T, schema map[string]any) []string {
	t.Helper()
	set := map[string]bool{}
	if c, ok := schema["const"].(string); ok {
		set[c] = true
	}
	values, _ := schema["enum"].([]any)
	for _, v := range values {
		set[v.(string)] = true
	}
	return sorted(set)
}

// TestEnumsMatchConstants: the error codes, modes and outcomes of the
// document are the constants of errors.go, leasekeeper.go and results.go.
func TestEnumsMatchConstants(t *testing.T) {
	doc := rawDoc(t)
	if got, want := enum(t, at(t, doc, "#/components/schemas/ErrorCode")), constants(t, "ErrorCode"); !slices.Equal(got, want) {
		t.Errorf("ErrorCode's enum is %v; errors.go has %v", got, want)
	}
	if got, want := enum(t, at(t, doc, "#/components/schemas/Mode")), constants(t, "Mode"); !slices.Equal(got, want) {
		t.Errorf("Mode's enum is %v; the root package has %v", got, want)
	}
	// A grant's endings, and null for a live lease.
	var endings []string
	for _, v := range at(t, doc, "#/components/schemas/GrantRecord/properties/ended")["enum"].([]any) {
		if v != nil {
			endings = append(endings, v.(string))
		}
	}
	if slices.Sort(endings); !slices.Equal(endings, constants(t, "Ending")) {
		t.Errorf("GrantRecord's endings are %v; results.go has %v", endings, constants(t, "Ending"))
	}
	// Every outcome property's values, over all schemas.
	set := map[string]bool{}
	for _, s := range at(t, doc, "#/components/schemas") {
		props, _ := s.(map[string]any)["properties"].(map[string]any)
		if o, ok := props["outcome"].(map[string]any); ok {
			for _, v := range enum(t, o) {
				set[v] = true
			}
		}
	}
	if got, want := sorted(set), constants(t, "Outcome"); !slices.Equal(got, want) {
		t.Errorf("the outcomes of the document are %v; results.go has %v", got, want)
	}
	// Each error response names codes of ErrorCode.
	codes := constants(t, "ErrorCode")
	for name := range at(t, doc, "#/components/responses") {
		schema := at(t, doc, "#/components/responses/"+name+"/content/application~1json/schema")
		all, _ := schema["allOf"].([]any)
		if len(all) != 2 {
			t.Errorf("components/responses/%s: want allOf of Error and its codes", name)
			continue
		}
		narrowed := all[1].(map[string]any)["properties"].(map[string]any)["error"].(map[string]any)
		for _, c := range enum(t, narrowed) {
			if !slices.Contains(codes, c) {
				t.Errorf("components/responses/%s names the unknown code %q", name, c)
			}
		}
	}
}

// TestLimitsMatchConstants: the document's bounds are the Go constants.
func TestLimitsMatchConstants(t *testing.T) {
	doc := rawDoc(t)
	ttl := at(t, doc, "#/components/schemas/TTL")
	if ttl["maximum"] != float64(lk.MaxTTL) || ttl["minimum"] != float64(1) {
		t.Errorf("TTL is %v..%v, want 1..%d", ttl["minimum"], ttl["maximum"], lk.MaxTTL)
	}
	limit := at(t, doc, "#/components/parameters/limit/schema")
	if limit["maximum"] != float64(lk.MaxLocksLimit) || limit["default"] != float64(lk.DefaultLocksLimit) || limit["minimum"] != float64(1) {
		t.Errorf("limit is %v..%v default %v, want 1..%d default %d",
			limit["minimum"], limit["maximum"], limit["default"], lk.MaxLocksLimit, lk.DefaultLocksLimit)
	}
}

// TestDocumentRules: the rules the document keeps beyond OpenAPI's: every
// $ref resolves, every schema and field says what it is, result objects
// allow no undocumented field while request bodies ignore unknown ones,
// error answers are reusable responses, health and the document are open.
func TestDocumentRules(t *testing.T) {
	doc := rawDoc(t)

	var walkRefs func(where string, node any)
	walkRefs = func(where string, node any) {
		switch n := node.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/") {
					t.Errorf("%s: $ref %q is not local", where, ref)
				} else {
					at(t, doc, ref)
				}
			}
			for k, v := range n {
				walkRefs(where+"/"+k, v)
			}
		case []any:
			for i, v := range n {
				walkRefs(where+"/"+strconv.Itoa(i), v)
			}
		}
	}
	walkRefs("#", doc)

	schemas := at(t, doc, "#/components/schemas")
	for name, s := range schemas {
		s := s.(map[string]any)
		if d, _ := s["description"].(string); d == "" {
			t.Errorf("components/schemas/%s has no description", name)
		}
		props, _ := s["properties"].(map[string]any)
		for p, ps := range props {
			if d, _ := ps.(map[string]any)["description"].(string); d == "" {
				t.Errorf("components/schemas/%s/properties/%s has no description", name, p)
			}
		}
		if s["type"] != "object" {
			continue
		}
		closed := s["additionalProperties"] == false
		if strings.HasSuffix(name, "Request") && closed {
			t.Errorf("components/schemas/%s: request bodies ignore unknown fields, so no additionalProperties: false", name)
		}
		if !strings.HasSuffix(name, "Request") && !closed {
			t.Errorf("components/schemas/%s: an answer's object wants additionalProperties: false", name)
		}
	}

	for path, item := range at(t, doc, "#/paths") {
		for method, op := range item.(map[string]any) {
			op := op.(map[string]any)
			if op["operationId"] == nil {
				t.Errorf("%s %s has no operationId", method, path)
			}
			responses := op["responses"].(map[string]any)
			for status, r := range responses {
				r := r.(map[string]any)
				_, isRef := r["$ref"]
				switch {
				case method == "head" && (isRef || r["content"] != nil):
					t.Errorf("%s %s: the %s answer has a body (a $ref to components/responses has one)", method, path, status)
				case method != "head" && status != "200" && !isRef:
					t.Errorf("%s %s: the %s answer is not a $ref to components/responses", method, path, status)
				}
			}
			// The answers to the requests that miss an operation, listed
			// with it (api.md, Errors): another method of a /v1 path is
			// answered 405, an unknown path 404.
			if strings.HasPrefix(path, "/v1/") && method != "head" {
				for status, name := range map[string]string{"404": "NotFound", "405": "MethodNotAllowed"} {
					r, _ := responses[status].(map[string]any)
					if r["$ref"] != "#/components/responses/"+name {
						t.Errorf("%s %s: the %s answer is %v, want a $ref to components/responses/%s", method, path, status, r, name)
					}
				}
			}
			// The server reads a body as JSON whatever its Content-Type
			// (curl -d sends application/x-www-form-urlencoded).
			if body, ok := op["requestBody"].(map[string]any); ok {
				content, _ := body["content"].(map[string]any)
				json, any := content["application/json"], content["*/*"]
				if json == nil || !reflect.DeepEqual(json, any) {
					t.Errorf("%s %s: the request body's content is %v; want application/json and */*, with one schema", method, path, content)
				}
			}
			sec, has := op["security"].([]any)
			open := path == "/v1/health" || path == "/v1/ready" || path == "/v1/openapi.json"
			if open != (has && len(sec) == 0) {
				t.Errorf("%s %s: security %v; want [] on health, ready and openapi.json only", method, path, op["security"])
			}
		}
	}
}

// TestDocumentDialect: the document says which JSON Schema its schemas are
// written in, 2020-12 (OpenAPI 3.1's); without jsonSchemaDialect tools
// fall back to draft-07, where a $ref's siblings (AcquireDeadlock's
// minItems on victims) are ignored.
func TestDocumentDialect(t *testing.T) {
	if got, want := rawDoc(t)["jsonSchemaDialect"], "https://json-schema.org/draft/2020-12/schema"; got != want {
		t.Errorf("jsonSchemaDialect is %v, want %s", got, want)
	}
}

// TestNoUnusedComponents: every response, schema and parameter of
// components is referred to (MethodNotAllowed was defined and attached to
// no operation): a component nothing uses says nothing of the server.
func TestNoUnusedComponents(t *testing.T) {
	doc := rawDoc(t)
	used := map[string]bool{}
	var walk func(node any)
	walk = func(node any) {
		switch n := node.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok {
				used[ref] = true
			}
			for _, v := range n {
				walk(v)
			}
		case []any:
			for _, v := range n {
				walk(v)
			}
		}
	}
	walk(doc)
	// Event is the data of each message of GET /v1/events, whose
	// text/event-stream OpenAPI 3.1 describes by no schema: the stream's
	// description names it.
	used["#/components/schemas/Event"] = true
	for _, kind := range []string{"responses", "schemas", "parameters"} {
		for name := range at(t, doc, "#/components/"+kind) {
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is used by nothing", ref)
			}
		}
	}
}

// TestHistoryBeforeAsServerWants: the document's before of GET
// /v1/history takes the values the server takes, a token (an integer >= 1)
// for a lock or a client's cursor, and refuses the others, as libopenapi's
// request validator reads it.
func TestHistoryBeforeAsServerWants(t *testing.T) {
	v := New(t)
	for _, before := range []string{
		"1", "2", "+3", "007", "9223372036854775807", "12,3,exports/daily", "0,1,a,b", "-5,1,L", "12,3,a\nb",
		"0", "-1", "00", "x", "1.5", "1e3", " 1", "12,0,L", "12,3,", "x,3,L", "12,-3,L", ",3,L", "12,,L",
	} {
		q := url.Values{"lock": {"L"}, "before": {before}}
		server := lk.HistoryRequest{Lock: "L", Before: before, Limit: 1}.Validate() == nil ||
			lk.HistoryRequest{Client: "c", Before: before, Limit: 1}.Validate() == nil
		req := httptest.NewRequest("GET", "/v1/history?"+q.Encode(), nil)
		doc, errs := v.v.GetParameterValidator().ValidateQueryParams(req)
		if doc != server {
			var why []string
			for _, e := range errs {
				why = append(why, e.Message+": "+e.Reason)
			}
			t.Errorf("before=%q: the server takes it: %v; the document: %v %v", before, server, doc, why)
		}
	}
}

// TestDocumentVersion: info.version is the server's version, as GET
// /v1/health tells it (docs/api.md): bump both together.
func TestDocumentVersion(t *testing.T) {
	if got := at(t, rawDoc(t), "#/info")["version"]; got != lk.Version {
		t.Errorf("info.version is %v; lk.Version is %q", got, lk.Version)
	}
}

// TestRequestBodiesAnyContentType: the document takes a request body
// whatever its Content-Type, as the server does (curl -d sends
// application/x-www-form-urlencoded), and as JSON of the operation's
// schema. libopenapi's validator checks the schema of JSON media types
// only, and takes a request without a Content-Type for one of an unknown
// type: so the refusals are tried as JSON.
func TestRequestBodiesAnyContentType(t *testing.T) {
	v := New(t)
	try := func(ct, body string, valid bool) {
		t.Helper()
		req := httptest.NewRequest("POST", "/v1/acquire", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		ok, errs := v.v.GetRequestBodyValidator().ValidateRequestBody(req)
		if ok != valid {
			var why []string
			for _, e := range errs {
				why = append(why, e.Message+": "+e.Reason)
			}
			t.Errorf("POST /v1/acquire with Content-Type %q and %s: the document says valid %v, want %v %v", ct, body, ok, valid, why)
		}
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/x-www-form-urlencoded", "text/plain"} {
		try(ct, `{"client":"etl-a","lock":"exports/daily","ttl":30}`, true)
	}
	try("application/json", `{"client":"etl-a","lock":"exports/daily","ttl":"30"}`, false)
	try("application/json", `{"client":"etl-a","lock":"exports/daily"}`, false)
}
