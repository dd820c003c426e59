package apitest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// recorder is a testing.TB that keeps what Transport reports.
type recorder struct {
	testing.TB // nil: only the methods below are called
	mu         sync.Mutex
	errs       []string
	cleanups   []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) reported() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// fakeServer answers a few paths rightly, and /bad ones wrongly.
func fakeServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body+"\n")
	}
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, string(marshal(t, lk.HealthResult{Status: "ok", Version: lk.Version})))
	})
	mux.HandleFunc("POST /v1/acquire", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, `["granted",7,1767225630]`) // the old tuple
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		io.WriteString(w, "# TYPE up gauge\nup 1\n")
	})
	mux.HandleFunc("GET /v1/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, `{"outcome":`) // then the connection is closed
	})
	srv := httptest.NewServer(mux) // its own 404 is text/plain: a mismatch
	t.Cleanup(srv.Close)
	return srv
}

func TestTransport(t *testing.T) {
	v := New(t)
	srv := fakeServer(t)
	rec := &recorder{}
	hc := &http.Client{Transport: v.Transport(rec, nil)}

	get := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"client":"a","lock":"L","ttl":30}`))
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the body: %v", method, path, err)
		}
		return res, string(b)
	}

	// A valid answer: nothing reported, the body intact.
	_, body := get("GET", "/v1/health")
	if want := string(marshal(t, lk.HealthResult{Status: "ok", Version: lk.Version})) + "\n"; body != want {
		t.Errorf("health body %q, want %q", body, want)
	}
	_, body = get("GET", "/metrics")
	if body != "# TYPE up gauge\nup 1\n" {
		t.Errorf("metrics body %q", body)
	}
	if errs := rec.reported(); len(errs) != 0 {
		t.Fatalf("valid answers reported: %q", errs)
	}

	// A mismatch: reported with method, path, status and body; the body
	// still readable.
	_, body = get("POST", "/v1/acquire")
	if body != "[\"granted\",7,1767225630]\n" {
		t.Errorf("acquire body %q", body)
	}
	errs := rec.reported()
	if len(errs) != 1 {
		t.Fatalf("reported %d times, want 1: %q", len(errs), errs)
	}
	for _, want := range []string{"POST", "/v1/acquire", "200", `["granted",7,1767225630]`} {
		if !strings.Contains(errs[0], want) {
			t.Errorf("report %q does not name %q", errs[0], want)
		}
	}

	// ServeMux's own text 404 is not an Error object.
	res, _ := get("GET", "/v1/nope")
	if res.StatusCode != 404 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if errs := rec.reported(); len(errs) != 2 || !strings.Contains(errs[1], "404 page not found") {
		t.Errorf("the text 404 was not reported: %q", errs)
	}

	// A body that breaks off comes back as it came, unchecked.
	res, err := hc.Get(srv.URL + "/v1/broken")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil || string(b) != `{"outcome":` {
		t.Errorf("broken body: read %q, %v; want the part sent and an error", b, err)
	}
	if errs := rec.reported(); len(errs) != 2 {
		t.Errorf("a broken body was checked: %q", errs[2:])
	}

	// After the test's end, nothing is reported.
	rec.end()
	get("POST", "/v1/acquire")
	if errs := rec.reported(); len(errs) != 2 {
		t.Errorf("reported after the end: %q", errs[2:])
	}
}

// TestTransportStreams: an answer of another Content-Type goes through
// unread, so that its first event arrives before its end.
func TestTransportStreams(t *testing.T) {
	v := New(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release)
	rec := &recorder{}
	hc := &http.Client{Transport: v.Transport(rec, nil)}

	line := make(chan string, 1)
	go func() {
		res, err := hc.Get(srv.URL + "/v1/events")
		if err != nil {
			line <- err.Error()
			return
		}
		defer res.Body.Close()
		s, _ := bufio.NewReader(res.Body).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "data: 1\n" {
			t.Errorf("first line %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's first event did not arrive before its end: the body was buffered")
	}
	if errs := rec.reported(); len(errs) != 0 {
		t.Errorf("a stream was checked: %q", errs)
	}
}

// TestTransportError: a failure of the base transport is handed back.
func TestTransportError(t *testing.T) {
	v := New(t)
	want := errors.New("no route")
	rt := v.Transport(&recorder{}, roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, want }))
	req := httptest.NewRequest("GET", "/v1/health", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, want) {
		t.Errorf("err %v, want %v", err, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCheckConcurrently: one Validator serves parallel checks (run with
// -race).
func TestCheckConcurrently(t *testing.T) {
	v := New(t)
	answers := validAnswers(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				for _, a := range answers {
					if err := a.check(v); err != nil {
						t.Errorf("%s: %v", a.name, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
