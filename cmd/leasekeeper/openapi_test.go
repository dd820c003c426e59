package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
)

// TestAnswersSecondOpinion drives a real `leasekeeper serve` through every
// path of the API, with answers of every kind (results of each outcome,
// errors of each status the server answers without an auth file, another
// method, an unknown path, HEAD, a body sent as curl sends it), and checks
// each answer with both validators: libopenapi's (apitest's transport)
// and python3-jsonschema's (apitest.SecondOpinion), the events of
// GET /v1/events too.
func TestAnswersSecondOpinion(t *testing.T) {
	t.Parallel()
	apitest.NeedJSONSchema(t)
	bin := buildBinary(t)
	srv := startServe(t, bin, filepath.Join(t.TempDir(), "answers.db"))
	base := srv.URL()
	rec := &apitest.Recorder{}
	hc := &http.Client{Transport: rec.Transport(apitest.New(t).Transport(t, nil))}

	// The events, read from the start by a reader of their own.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan json.RawMessage, 1000)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events", nil)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- json.RawMessage(data)
			}
		}
	}()

	statuses := map[int]bool{}
	do := func(method, path, body string) []byte {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded") // curl -d's
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		statuses[res.StatusCode] = true
		return b
	}
	acquire := func(client, lock string, ttl int) {
		t.Helper()
		do("POST", "/v1/acquire", `{"client":"`+client+`","lock":"`+lock+`","ttl":`+strconv.Itoa(ttl)+`}`)
	}

	do("GET", "/v1/health", "")
	do("HEAD", "/v1/health", "")
	do("GET", "/v1/ready", "")
	do("GET", "/v1/openapi.json", "")
	acquire("etl-a", "exports/daily", 30)
	acquire("etl-a", "exports/daily", 30) // client_busy
	acquire("etl-b", "exports/daily", 30) // queued
	acquire("etl-c", "exports/daily", 0)  // invalid_ttl
	acquire("dash-1", "reports/weekly", 30)
	do("POST", "/v1/acquire", "null")                                                            // invalid_arguments
	do("POST", "/v1/acquire", `{"client":"x","lock":"`+strings.Repeat("x", 140000)+`","ttl":1}`) // body_too_large
	do("POST", "/v1/renew", `{"client":"etl-a","lock":"exports/daily","ttl":30}`)
	do("POST", "/v1/renew", `{"client":"etl-b","lock":"exports/daily","ttl":30}`) // not_holder
	do("POST", "/v1/write", `{"lock":"exports/daily","key":"part-1","value":"rows 1-100","token":1}`)
	do("POST", "/v1/write", `{"lock":"exports/daily","key":"part-1","value":"forged","token":99}`) // token_not_granted
	do("GET", "/v1/read?lock=exports/daily&key=part-1", "")
	do("GET", "/v1/read?lock=exports/daily&key=part-2", "")
	do("GET", "/v1/inspect?lock=exports/daily", "")
	do("GET", "/v1/status?client=etl-b", "")
	do("GET", "/v1/status?client=nobody", "")
	do("GET", "/v1/locks?limit=1", "")
	do("GET", "/v1/locks", "")
	do("POST", "/v1/release", `{"client":"etl-a","lock":"exports/daily"}`) // hands over to etl-b
	do("POST", "/v1/write", `{"lock":"exports/daily","key":"part-1","value":"rows 1-100","token":2}`)
	do("POST", "/v1/write", `{"lock":"exports/daily","key":"part-1","value":"late","token":1}`) // stale_token
	do("POST", "/v1/release", `{"client":"etl-c","lock":"exports/daily"}`)                      // not_holder
	acquire("etl-c", "exports/daily", 30)                                                       // queued
	do("POST", "/v1/release", `{"client":"etl-c","lock":"exports/daily"}`)                      // withdrawn
	// A deadlock: e holds X and waits for Y, which f holds; f asks for X.
	acquire("etl-e", "X", 30)
	acquire("etl-f", "Y", 30)
	acquire("etl-e", "Y", 30)
	acquire("etl-f", "X", 30)
	do("GET", "/v1/status?client=etl-f", "")
	do("GET", "/v1/graph", "")
	do("GET", "/v1/graph?lock=Y", "")
	do("POST", "/v1/revoke", `{"client":"etl-b","lock":"exports/daily"}`)
	do("POST", "/v1/revoke", `{"client":"etl-b","lock":"exports/daily"}`) // not_holder
	do("POST", "/v1/unfence", `{"lock":"exports/daily"}`)
	acquire("etl-a", "exports/hourly", 30) // a second grant of etl-a's, for a second page
	do("POST", "/v1/write", `{"lock":"exports/hourly","key":"k","value":"v","token":1}`)
	do("POST", "/v1/delete", `{"client":"etl-a","lock":"exports/hourly","key":"k","token":1}`)
	do("POST", "/v1/write", `{"lock":"exports/hourly","key":"k","value":"v","token":1}`)
	do("POST", "/v1/store/clear", `{"lock":"exports/hourly"}`)
	do("POST", "/v1/stale", `{"client":"etl-a","lock":"exports/hourly","token":1,"newer":2,"resource":"orders"}`)
	do("POST", "/v1/stale", `{"client":"etl-b","lock":"exports/hourly","token":1,"newer":2,"resource":"orders"}`) // token_not_granted
	var page lk.HistoryResult
	if err := json.Unmarshal(do("GET", "/v1/history?lock=exports/daily&limit=1", ""), &page); err != nil || page.Next == nil {
		t.Fatalf("history: %+v %v", page, err)
	}
	do("GET", "/v1/history?lock=exports/daily&limit=1&before="+url.QueryEscape(*page.Next), "")
	if err := json.Unmarshal(do("GET", "/v1/history?client=etl-a&limit=1", ""), &page); err != nil || page.Next == nil {
		t.Fatalf("history of a client: %+v %v", page, err)
	}
	do("GET", "/v1/history?client=etl-a&before="+url.QueryEscape(*page.Next), "")
	do("GET", "/v1/history?lock=exports/daily&before=0", "") // invalid_arguments
	do("GET", "/v1/store?lock=exports/daily", "")
	do("GET", "/metrics", "")
	do("GET", "/v1/nope", "")
	do("POST", "/v1/v1/acquire", `{}`)
	do("GET", "/v1/acquire", "")
	do("HEAD", "/v1/acquire", "")
	do("DELETE", "/v1/health", "")
	do("POST", "/metrics", "")

	answers := rec.Answers()
	timeout := time.After(5 * time.Second)
	for n := 0; n < 10; {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the event stream ended")
			}
			answers = append(answers, apitest.Answer{Event: true, Body: e})
			n++
		case <-timeout:
			t.Fatalf("%d events in 5 s, want 10 or more", n)
		}
	}
	cancel()
	for e := range events {
		answers = append(answers, apitest.Answer{Event: true, Body: e})
	}

	// Coverage: every path of the document, every status the server
	// answers without an auth file.
	var doc struct{ Paths map[string]any }
	if err := json.Unmarshal(lk.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for path := range doc.Paths {
		if path != "/metrics" && path != "/v1/events" && !slices.ContainsFunc(answers, func(a apitest.Answer) bool { return a.Path == path }) {
			t.Errorf("no answer of %s to check", path)
		}
	}
	for _, s := range []int{200, 400, 404, 405, 409, 413} {
		if !statuses[s] {
			t.Errorf("no answer with status %d to check", s)
		}
	}
	apitest.SecondOpinion(t, answers)
}
