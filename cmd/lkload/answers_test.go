package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParseAnswer(t *testing.T) {
	for _, c := range []struct {
		body string
		want answer
	}{
		// The old tuples.
		{`["granted",7,1767225630]`, answer{outcome: "granted", token: 7}},
		{`["granted", 7, 1767225630]`, answer{outcome: "granted", token: 7}},
		{` [ "granted", 8, 1767225630, ["bob"] ] ` + "\n", answer{outcome: "granted", token: 8}},
		{`["queued",2]`, answer{outcome: "queued"}},
		{`["deadlock",["bob","alice"]]`, answer{outcome: "deadlock"}},
		{`"released"` + "\n", answer{outcome: "released"}},
		{`"withdrawn"`, answer{outcome: "withdrawn"}},
		{`"error: not holder"`, answer{err: "error: not holder"}},
		// The objects.
		{`{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`, answer{outcome: "granted", token: 7}},
		{`{ "expires_at": 1767225630, "token": 9, "outcome": "granted", "granted_at": 1767225600, "victims": ["bob"] }`,
			answer{outcome: "granted", token: 9}},
		{`{"outcome":"queued","position":2}`, answer{outcome: "queued"}},
		{`{"outcome":"released"}` + "\n", answer{outcome: "released"}},
		{`{"outcome":"withdrawn"}`, answer{outcome: "withdrawn"}},
		{`{"error":"not_holder","message":"alice holds no lease on L"}`, answer{err: "not_holder"}},
	} {
		got, err := parseAnswer([]byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("parseAnswer(%s) = %+v, %v; want %+v", c.body, got, err, c.want)
		}
	}
	for _, body := range []string{
		``, `null`, `7`, `[]`, `[7]`, `[""]`, `""`, `["granted"]`, `["granted",7]`, `["granted","7",1]`, `["granted",0,1]`,
		`{}`, `{"outcome":""}`, `{"error":""}`, `{"outcome":"granted"}`, `{"outcome":"granted","token":7}`,
		`{"outcome":"granted","token":"7","expires_at":1}`, `{"outcome":"released","error":"not_holder"}`,
		`{"outcome":"released"`, `["granted",7,1`,
	} {
		if got, err := parseAnswer([]byte(body)); err == nil {
			t.Errorf("parseAnswer(%q) = %+v, want an error", body, got)
		}
	}
}

func TestGrantedReleased(t *testing.T) {
	for _, c := range []struct {
		status  int
		body    string
		granted bool // whether it grants, decoded or quick
		release bool
	}{
		{200, `["granted",7,1767225630]`, true, false},
		{200, `["granted", 7, 1767225630]`, true, false},
		{200, `[ "granted", 7, 1767225630 ]`, true, false},
		{200, `{"outcome":"granted","token":7,"granted_at":1767225600,"expires_at":1767225630}`, true, false},
		{200, `{"token":7,"outcome":"granted","granted_at":1767225600,"expires_at":1767225630}`, true, false},
		{200, `["queued",1]`, false, false},
		{200, `{"outcome":"queued","position":1}`, false, false},
		{409, `"error: client busy"`, false, false},
		{409, `{"error":"client_busy","message":"c0 already holds L"}`, false, false},
		{200, `"released"`, false, true},
		{200, `{"outcome":"released"}`, false, true},
		{200, `{ "outcome": "released" }`, false, true},
		{200, `"withdrawn"`, false, false},
		{200, `{"outcome":"withdrawn"}`, false, false},
		{409, `"error: not holder"`, false, false},
		{409, `{"error":"not_holder","message":"c0 holds no lease on L"}`, false, false},
		{503, `{"outcome":"released"}`, false, false}, // not a 200
		{503, `["granted",7,1767225630]`, false, false},
	} {
		for _, quick := range []bool{false, true} {
			if got := isGranted(c.status, []byte(c.body), quick); got != c.granted {
				t.Errorf("isGranted(%d, %s, quick %v) = %v", c.status, c.body, quick, got)
			}
		}
		if got := isReleased(c.status, []byte(c.body)); got != c.release {
			t.Errorf("isReleased(%d, %s) = %v", c.status, c.body, got)
		}
	}
}

// shapeServer is a stand-in for leasekeeper serve that answers acquire and
// release in the old tuples, the new objects, or the two by turns, with
// the layouts of each shape that the raw client recognises without
// decoding and others that it must decode. It keeps who holds what, so
// that an answer misread as a grant or a release shows as a refusal.
type shapeServer struct {
	shape string // "old", "new" or "mixed"
	n     atomic.Int64
	mu    sync.Mutex
	held  map[string]string // lock → client
	token int64
	old   atomic.Int64 // answers given in each shape
	new   atomic.Int64
}

func (s *shapeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/health" {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok","clock":null,"version":"0.1.0"}`+"\n")
		return
	}
	var req struct{ Client, Lock string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	i := s.n.Add(1)
	old := s.shape == "old" || s.shape == "mixed" && i%2 == 0
	plain := i%3 != 0 // the servers' own layout, else another
	if old {
		s.old.Add(1)
	} else {
		s.new.Add(1)
	}
	status, body := http.StatusOK, ""
	s.mu.Lock()
	switch r.URL.Path {
	case "/v1/acquire":
		switch {
		case s.held[req.Lock] != "":
			status = http.StatusConflict
			body = pick(old, plain, `"error: client busy"`, `{"error":"client_busy","message":"busy"}`, ``, ``)
		default:
			s.held[req.Lock] = req.Client
			s.token++
			t := s.token
			body = pick(old, plain,
				fmt.Sprintf(`["granted",%d,1767225630]`, t),
				fmt.Sprintf(`{"outcome":"granted","token":%d,"granted_at":1767225600,"expires_at":1767225630}`, t),
				fmt.Sprintf(`[ "granted", %d, 1767225630 ]`, t),
				fmt.Sprintf(`{"token": %d, "outcome": "granted", "granted_at": 1767225600, "expires_at": 1767225630}`, t))
		}
	case "/v1/release":
		switch {
		case s.held[req.Lock] != req.Client:
			status = http.StatusConflict
			body = pick(old, plain, `"error: not holder"`, `{"error":"not_holder","message":"not holder"}`, ``, ``)
		default:
			delete(s.held, req.Lock)
			body = pick(old, plain, `"released"`, `{"outcome":"released"}`, ` "released" `, `{ "outcome": "released" }`)
		}
	default:
		status, body = http.StatusNotFound, pick(old, true, `"error: not found"`, `{"error":"not_found","message":"no such path"}`, ``, ``)
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body+"\n")
}

// pick chooses among an answer's old and new layouts; an empty other
// layout falls back to the plain one.
func pick(old, plain bool, oldPlain, newPlain, oldOther, newOther string) string {
	switch {
	case old && (plain || oldOther == ""):
		return oldPlain
	case old:
		return oldOther
	case plain || newOther == "":
		return newPlain
	}
	return newOther
}

// TestLoadBothShapes runs lkload, with both client sides, against servers
// answering in the old tuples, in the new objects, and in both by turns:
// every pair must complete, with no error.
func TestLoadBothShapes(t *testing.T) {
	for _, shape := range []string{"old", "new", "mixed"} {
		for _, mode := range []string{"raw", "net"} {
			t.Run(shape+"/"+mode, func(t *testing.T) {
				s := &shapeServer{shape: shape, held: map[string]string{}}
				hs := httptest.NewServer(s)
				defer hs.Close()
				cfg, err := parseFlags([]string{"--server", hs.URL, "--clients", "1,4", "--duration", "200ms",
					"--warmup", "0s", "--http", mode})
				if err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				if err := run(context.Background(), cfg, &out); err != nil {
					t.Fatalf("%v\n%s", err, out.String())
				}
				checkRows(t, shape+"/"+mode, out.String(), "external", 1, 2)
				nOld, nNew := s.old.Load(), s.new.Load()
				switch {
				case shape == "old" && nNew != 0, shape == "new" && nOld != 0, shape == "mixed" && (nOld == 0 || nNew == 0):
					t.Errorf("%d answers in the old shape, %d in the new", nOld, nNew)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if len(s.held) != 0 {
					t.Errorf("locks left held: %v", s.held)
				}
			})
		}
	}
}
