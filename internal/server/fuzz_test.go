package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/repo"
)

// FuzzRequestBody sends arbitrary bodies to every POST route: whatever they
// hold, the answer is a result or a 4xx with an error object, as the OpenAPI
// document describes them, never a 500 or a hang, and the server goes on
// serving.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{
		`{"client":"a","lock":"L","ttl":10}`, `{"client":"a","lock":"L","ttl":10,"wait":1}`,
		`{"lock":"L","key":"k","value":"v","token":1}`, `{}`, `[]`, `null`, `{"client":1}`,
		`{"client":"a","lock":"L","ttl":1e400}`, `{"client":"a","lock":"L","ttl":-0,"mode":"shared"}`,
		`{"client":"a","lock":"L","ttl":10,"wait":"1"}`, "{\"client\":\"\xff\",\"lock\":\"L\",\"ttl\":10}",
	} {
		for _, route := range []string{"acquire", "renew", "release", "revoke", "write"} {
			f.Add(route, s)
		}
	}
	clock := engine.NewManualClock(time.Unix(0, 0))
	eng, err := engine.Open(context.Background(), repo.MemoryPath, engine.Options{Clock: clock})
	if err != nil {
		f.Fatal(err)
	}
	srv := server.New(eng, server.Options{})
	h := srv.Handler()
	v := apitest.New(f)
	f.Cleanup(func() { eng.Close() })
	f.Fuzz(func(t *testing.T, route, body string) {
		switch route {
		case "acquire", "renew", "release", "revoke", "write":
		default:
			route = "acquire"
		}
		var fields map[string]any
		if json.Unmarshal([]byte(body), &fields) == nil && fields["wait"] != nil {
			// A wait would block on the manual clock, which never moves
			// here; the blocking path has its own tests.
			t.Skip()
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/"+route, strings.NewReader(body))
		done := make(chan struct{})
		go func() { h.ServeHTTP(rec, req); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("POST /v1/%s %q did not answer", route, body)
		}
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("POST /v1/%s %q: HTTP %d %s", route, body, rec.Code, rec.Body.String())
		}
		if err := v.Check(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Fatalf("POST /v1/%s %q: %v", route, body, err)
		}
		if rec.Code != http.StatusOK {
			var e struct {
				Code    lk.ErrorCode `json:"error"`
				Message string       `json:"message"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code == "" || e.Message == "" || server.StatusOf(e.Code) != rec.Code {
				t.Fatalf("POST /v1/%s %q: HTTP %d without its error object: %s", route, body, rec.Code, rec.Body.String())
			}
		}
		rec = httptest.NewRecorder()
		req = httptest.NewRequest("GET", "/v1/health", nil)
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("the server stopped serving after POST /v1/%s %q", route, body)
		}
		if err := v.Check(req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Fatalf("after POST /v1/%s %q: %v", route, body, err)
		}
	})
}
