// Package deploy_test checks the deployable units of deploy/ against a real
// server: every series that the alerts (prometheus/alerts.yml) and the
// dashboard (grafana/leasekeeper.json) name must be in the scrape of a
// serve that has seen some traffic, and the scrape must pass promtool, which
// also evaluates the alerts on it. The systemd unit and the rules' own unit
// tests are checked by .ci/run (systemd-analyze verify, promtool check rules
// and test rules), which need no server.
package deploy_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.RemoveBinary()
	os.Exit(code)
}

// rule is an alerting rule of alerts.yml.
type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return rules
}

// query is a PromQL expression of the dashboard or the rules, and where.
type query struct{ where, expr string }

// labelValuesRE is Grafana's label_values(SELECTOR, LABEL) of a variable.
var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// dashboardQueries returns the expressions of every panel of the dashboard
// (rows' panels included) and of its query variables.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "leasekeeper.json"))
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("leasekeeper.json: %v", err)
	}
	var out []query
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("dashboard panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				out = append(out, query{"panel " + strconv.Quote(p.Title), tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValuesRE.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: %q is not label_values(SELECTOR, LABEL)", v.Name, q.Query)
		}
		out = append(out, query{"variable " + v.Name, m[1]})
	}
	return out
}

// deployedQueries are the expressions of the rules and of the dashboard.
func deployedQueries(t *testing.T) []query {
	var out []query
	for _, r := range alertRules(t) {
		out = append(out, query{"alert " + r.Alert, r.Expr})
	}
	return append(out, dashboardQueries(t)...)
}

// scrape is a parsed /metrics: each series' labels and value, by name.
type scrape map[string][]series

type series struct {
	labels map[string]string
	value  float64
}

// parseScrape reads Prometheus's text format.
func parseScrape(t *testing.T, text string) scrape {
	t.Helper()
	out := scrape{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := identRE.FindString(line)
		rest := line[len(name):]
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			ms, r, err := matchers(rest)
			if err != nil {
				t.Fatalf("scrape line %q: %v", line, err)
			}
			for _, m := range ms {
				labels[m.label] = m.value
			}
			rest = r
		}
		fields := strings.Fields(rest)
		if name == "" || len(fields) == 0 {
			t.Fatalf("scrape line %q: not NAME{LABELS} VALUE", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		out[name] = append(out[name], series{labels, v})
	}
	return out
}

// targetLabels are added by Prometheus as it scrapes: a scrape has none.
var targetLabels = map[string]bool{"job": true, "instance": true}

// prometheusOwn are series Prometheus makes itself, not the server.
var prometheusOwn = map[string]bool{"up": true}

// wordsRE is a regular expression that is only alternatives of plain
// label values, such as "disk_full|database_unavailable".
var wordsRE = regexp.MustCompile(`^[a-zA-Z0-9_.+-]+(\|[a-zA-Z0-9_.+-]+)*$`)

// missing returns why sel finds nothing in sc, or "" when it finds a
// series: one of its name with every label value that sel asks for (=, or
// each alternative of a =~ of plain words). Matchers on Prometheus's target
// labels, on Grafana variables, and negative ones are left out.
func (sc scrape) missing(sel selector) string {
	if prometheusOwn[sel.name] {
		return ""
	}
	all, ok := sc[sel.name]
	if !ok {
		return "no series named " + sel.name
	}
	var wants []map[string]string
	want := map[string]string{}
	for _, m := range sel.matchers {
		if targetLabels[m.label] || m.label == "__name__" || strings.Contains(m.value, "$") {
			continue
		}
		switch {
		case m.op == "=":
			want[m.label] = m.value
		case m.op == "=~" && wordsRE.MatchString(m.value):
			for _, alt := range strings.Split(m.value, "|") {
				wants = append(wants, map[string]string{m.label: alt})
			}
		}
	}
	wants = append(wants, want)
	for _, w := range wants {
		found := slices.ContainsFunc(all, func(s series) bool {
			for k, v := range w {
				if s.labels[k] != v {
					return false
				}
			}
			return true
		})
		if !found {
			return fmt.Sprintf("no series %s with %v", sel.name, w)
		}
	}
	return ""
}

// TestSelectors: the reader of PromQL finds every name and matcher of the
// shapes the rules and panels use, and no word that names no series.
func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up{job="leasekeeper"} == 0`, []string{`up{job="leasekeeper"}`}},
		{"(leasekeeper_ready == 0)\nunless on (job, instance)\n(leasekeeper_not_ready{reason=~\"disk_full|database_unavailable\"} == 1)",
			[]string{`leasekeeper_ready{}`, `leasekeeper_not_ready{reason=~"disk_full|database_unavailable"}`}},
		{`max_over_time(leasekeeper_not_ready{reason="disk_full"}[5m]) == 1`, []string{`leasekeeper_not_ready{reason="disk_full"}`}},
		{`sum by (job, instance) (increase(leasekeeper_deadlock_aborts_total[15m])) > 3 # tune`, []string{`leasekeeper_deadlock_aborts_total{}`}},
		{`histogram_quantile(0.99, sum by (op, le) (rate(x_bucket{job="$job", instance=~"$instance"}[$__rate_interval])))`,
			[]string{`x_bucket{job="$job", instance=~"$instance"}`}},
		{`a / (b > 0) > 0.9 and c offset 5m or {__name__="d", e!="f"} unless sum without (g) (h)`,
			[]string{`a{}`, `b{}`, `c{}`, `d{__name__="d", e!="f"}`, `h{}`}},
		{`topk(5, x{a='b\'c'}) * on (i) group_left (j) y`, []string{`x{a="b'c"}`, `y{}`}},
		{`1e3 + 2.5 - NaN * Inf`, nil},
	} {
		sels, err := selectors(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%q:\n got %q\nwant %q", c.expr, got, c.want)
		}
	}
	for _, bad := range []string{`x{a="b"`, `rate(x[5m]`, `sum by x`, `{a="b"}`, `x ; y`} {
		if sels, err := selectors(bad); err == nil {
			t.Errorf("%q: %v, want an error", bad, sels)
		}
	}
}

// TestEveryAlertTested: each alert of alerts.yml has a severity, a summary
// and a description, and alerts_test.yml makes it fire at least once.
func TestEveryAlertTested(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("prometheus", "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Tests []struct {
			Alerts []struct {
				Name string `yaml:"alertname"`
				Exp  []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("alerts_test.yml: %v", err)
	}
	fired := map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.Alerts {
			fired[a.Name] = fired[a.Name] || len(a.Exp) > 0
		}
	}
	for _, r := range alertRules(t) {
		if !fired[r.Alert] {
			t.Errorf("alert %s: no test of alerts_test.yml makes it fire", r.Alert)
		}
		if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
			t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s: a summary and a description are needed", r.Alert)
		}
	}
}

// server is a serve started for these tests, with the tokens of its auth
// file's principals.
type server struct {
	*cluster.Server
	admin, reader, limited string
}

// startServer starts serve with an auth file: an admin, a reader and a
// client principal limited to one request a second.
func startServer(t *testing.T) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{admin: newToken(t), reader: newToken(t), limited: newToken(t)}
	auth := fmt.Sprintf(`{"principals": [
		{"name": "ops", "token_sha256": %q, "role": "admin"},
		{"name": "dash", "token_sha256": %q, "role": "reader"},
		{"name": "etl", "token_sha256": %q, "role": "client", "clients": ["etl-*"], "rate": 1}
	]}`, hash(s.admin), hash(s.reader), hash(s.limited))
	authFile := filepath.Join(dir, "auth.json")
	if err := os.WriteFile(authFile, []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Server = cluster.Start(t, cluster.Options{Dir: dir, Args: []string{"--auth-file", authFile}}).Servers[0]
	return s
}

func newToken(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// call sends a request with token (none when "") and returns the status and
// the answer.
func (s *server) call(t *testing.T, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// expect sends a request as the admin and fails the test unless its outcome
// is want.
func (s *server) expect(t *testing.T, path, body, want string) map[string]any {
	t.Helper()
	status, v := s.call(t, s.admin, "POST", path, body)
	if status != http.StatusOK || v["outcome"] != want {
		t.Fatalf("POST %s %s: HTTP %d %v, want outcome %q", path, body, status, v, want)
	}
	return v
}

// scrapeText returns GET /metrics as the reader.
func (s *server) scrapeText(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest("GET", s.URL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.reader)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d %v\n%s", resp.StatusCode, err, b)
	}
	return string(b)
}

// traffic makes the server count one of everything the alerts and the
// panels read: grants on the spot and from a queue, a renewal, releases, a
// withdrawal, a revocation, a lapse, a deadlock abort, a stale write, a
// refusal and a rate limit; and it leaves a client waiting.
func traffic(t *testing.T, s *server) {
	s.expect(t, "/v1/acquire", `{"client":"a","lock":"L1","ttl":30}`, "granted") // token 1
	s.expect(t, "/v1/acquire", `{"client":"b","lock":"L1","ttl":30}`, "queued")
	s.expect(t, "/v1/renew", `{"client":"a","lock":"L1","ttl":30}`, "renewed")
	s.expect(t, "/v1/release", `{"client":"a","lock":"L1"}`, "released") // b granted token 2 from the queue
	s.expect(t, "/v1/write", `{"lock":"L1","key":"k","value":"v","token":2}`, "ok")
	if status, v := s.call(t, s.admin, "POST", "/v1/write", `{"lock":"L1","key":"k","value":"late","token":1}`); v["error"] != "stale_token" {
		t.Fatalf("a write with token 1 after token 2: HTTP %d %v, want stale_token", status, v)
	}
	s.expect(t, "/v1/revoke", `{"client":"b","lock":"L1"}`, "revoked")

	// A withdrawal: a waiter that releases.
	s.expect(t, "/v1/acquire", `{"client":"h","lock":"W","ttl":300}`, "granted")
	s.expect(t, "/v1/acquire", `{"client":"w","lock":"W","ttl":30}`, "queued")
	s.expect(t, "/v1/release", `{"client":"w","lock":"W"}`, "withdrawn")

	// A deadlock: x holds A and waits for B, y holds B and asks for A.
	s.expect(t, "/v1/acquire", `{"client":"x","lock":"A","ttl":300}`, "granted")
	s.expect(t, "/v1/acquire", `{"client":"y","lock":"B","ttl":300}`, "granted")
	s.expect(t, "/v1/acquire", `{"client":"x","lock":"B","ttl":300}`, "queued")
	s.expect(t, "/v1/acquire", `{"client":"y","lock":"A","ttl":300}`, "deadlock")

	// A refusal, and a principal over its rate.
	if status, _ := s.call(t, "", "GET", "/v1/locks", ""); status != http.StatusUnauthorized {
		t.Fatalf("GET /v1/locks without a token: HTTP %d, want 401", status)
	}
	limited := false
	for i := 0; i < 10 && !limited; i++ {
		status, _ := s.call(t, s.limited, "POST", "/v1/acquire", `{"client":"etl-1","lock":"E","ttl":30}`)
		limited = status == http.StatusTooManyRequests
	}
	if !limited {
		t.Fatal("10 requests at once of a principal with rate 1: none answered 429")
	}

	// A lapse, with a waiter handed the lock; then a client left waiting.
	// ttl 2, not 1: the server's clock counts whole seconds, so a lease of
	// 1 s may lapse at the next second's first commit, before next asks.
	s.expect(t, "/v1/acquire", `{"client":"short","lock":"LP","ttl":2}`, "granted")
	s.expect(t, "/v1/acquire", `{"client":"next","lock":"LP","ttl":300}`, "queued")
	s.expect(t, "/v1/acquire", `{"client":"later","lock":"LP","ttl":300}`, "queued")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.scrapeText(t), "\nleasekeeper_lapses_total 1\n") {
		if time.Now().After(deadline) {
			t.Fatal("the lease of ttl 2 did not lapse within 10 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// GET /v1/ready: a verdict for the readiness gauges.
	if status, _ := s.call(t, "", "GET", "/v1/ready", ""); status != http.StatusOK {
		t.Fatalf("GET /v1/ready: HTTP %d", status)
	}
}

// TestDeployedMetricsExist: after traffic, the scrape of a real serve has
// every series the alerts and the dashboard name, with the label values
// they select; promtool finds nothing to say about it; and the alerts,
// evaluated by promtool on it, are all quiet on a healthy server.
func TestDeployedMetricsExist(t *testing.T) {
	queries := deployedQueries(t)
	s := startServer(t)
	traffic(t, s)
	text := s.scrapeText(t)
	sc := parseScrape(t, text)
	named := map[string]bool{}
	for _, q := range queries {
		sels, err := selectors(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(sels) == 0 {
			t.Errorf("%s: %q names no series", q.where, q.expr)
		}
		for _, sel := range sels {
			named[sel.name] = true
			if why := sc.missing(sel); why != "" {
				t.Errorf("%s: %s is not in the scrape: %s", q.where, sel, why)
			}
		}
	}
	// Every metric of the server's own is documented, and on the
	// dashboard or in an alert.
	doc, err := os.ReadFile(filepath.Join("..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range sc {
		if !strings.HasPrefix(name, "leasekeeper_") {
			continue
		}
		base := name
		if h := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count"); sc[h+"_bucket"] != nil {
			base = h // a histogram's series
		}
		if !bytes.Contains(doc, []byte("| `"+base+"`")) && !bytes.Contains(doc, []byte("| `"+base+"{")) {
			t.Errorf("%s is not in docs/observability.md's table", base)
		}
		if !named[name] && !named[base+"_bucket"] && !named[base+"_count"] && !named[base+"_sum"] {
			t.Errorf("%s is neither on the dashboard nor in an alert", name)
		}
	}
	if t.Failed() {
		t.Logf("the scrape:\n%s", text)
	}
	checkMetrics(t, text)
	wantAlerts(t, sc, nil)
}

// TestPostgresUnavailableAlert: a server whose PostgreSQL is cut off
// answers /v1/ready 503 and shows the reason database_unavailable, on which
// promtool fires LeasekeeperPostgresUnavailable, and nothing else.
func TestPostgresUnavailableAlert(t *testing.T) {
	srv := cluster.Start(t, cluster.Options{Postgres: true, ProxyPostgres: true}).Servers[0]
	s := &server{Server: srv}
	s.expect(t, "/v1/acquire", `{"client":"a","lock":"L","ttl":300}`, "granted")
	srv.Proxy().Cut()
	defer srv.Proxy().Restore()
	if status, v := s.call(t, "", "GET", "/v1/ready", ""); status != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/ready with PostgreSQL cut off: HTTP %d %v, want 503", status, v)
	}
	resp, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(b)
	for _, want := range []string{"\nleasekeeper_ready 0\n", "\nleasekeeper_not_ready{reason=\"database_unavailable\"} 1\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("the scrape lacks %q:\n%s", strings.TrimSpace(want), text)
		}
	}
	wantAlerts(t, parseScrape(t, text), []string{"LeasekeeperPostgresUnavailable"})
}

// promtool returns the path of promtool, or skips the test (fails it under
// CI=true, where .ci/run has installed it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool is not installed: .ci/run installs it from Debian's prometheus package")
	}
	t.Skip("promtool is not installed (Debian's prometheus package has it; .ci/run installs it)")
	return ""
}

// checkMetrics feeds the scrape to promtool check metrics, which lints it
// (names, units, help texts) and fails on what it cannot parse.
func checkMetrics(t *testing.T, text string) {
	t.Helper()
	cmd := exec.Command(promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// wantAlerts has promtool evaluate alerts.yml on the scrape, as if
// Prometheus had scraped the same values every minute for 10 minutes as job
// "leasekeeper", and requires exactly the alerts of names to be firing
// then.
func wantAlerts(t *testing.T, sc scrape, names []string) {
	t.Helper()
	bin := promtool(t)
	rules, err := filepath.Abs(filepath.Join("prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	const instance = "leasekeeper-test:7070"
	type inputSeries struct {
		Series string `yaml:"series"`
		Values string `yaml:"values"`
	}
	type sample struct {
		Labels string  `yaml:"labels"`
		Value  float64 `yaml:"value"`
	}
	var input []inputSeries
	for name, all := range sc {
		if !strings.HasPrefix(name, "leasekeeper_") {
			continue
		}
		for _, s := range all {
			labels := []string{`job="leasekeeper"`, `instance="` + instance + `"`}
			for k, v := range s.labels {
				labels = append(labels, fmt.Sprintf("%s=%q", k, v))
			}
			sort.Strings(labels)
			v := strconv.FormatFloat(s.value, 'f', -1, 64)
			input = append(input, inputSeries{name + "{" + strings.Join(labels, ", ") + "}", strings.TrimSpace(strings.Repeat(v+" ", 11))})
		}
	}
	input = append(input, inputSeries{`up{job="leasekeeper", instance="` + instance + `"}`, strings.TrimSpace(strings.Repeat("1 ", 11))})
	sort.Slice(input, func(i, j int) bool { return input[i].Series < input[j].Series })
	exp := []sample{}
	for _, r := range alertRules(t) {
		if !slices.Contains(names, r.Alert) {
			continue
		}
		// The alert's labels: the rule's, and those its expression
		// keeps of the series (the reason, for the readiness alerts).
		labels := []string{`alertname="` + r.Alert + `"`, `alertstate="firing"`, `job="leasekeeper"`, `instance="` + instance + `"`}
		for k, v := range r.Labels {
			labels = append(labels, fmt.Sprintf("%s=%q", k, v))
		}
		if m := regexp.MustCompile(`reason="([a-z_]+)"`).FindStringSubmatch(r.Expr); m != nil {
			labels = append(labels, `reason="`+m[1]+`"`)
		}
		exp = append(exp, sample{"ALERTS{" + strings.Join(labels, ", ") + "}", 1})
	}
	test := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []any{map[string]any{
			"interval":     "1m",
			"input_series": input,
			"promql_expr_test": []any{map[string]any{
				"expr": `ALERTS{alertstate="firing"}`, "eval_time": "10m", "exp_samples": exp,
			}},
		}},
	}
	b, err := yaml.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scrape_test.yml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "test", "rules", path).CombinedOutput()
	if err != nil {
		t.Errorf("promtool test rules on the scrape, want firing %v: %v\n%s", names, err, out)
	}
}
