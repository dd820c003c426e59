package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/engine"
)

// TestWatch: Watch yields the events its filter selects, as the server
// commits them.
func TestWatch(t *testing.T) {
	ts := newServer(t, engine.NewManualClock(time.Unix(1000, 0)))
	c := client.New(ts.URL)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	events := make(chan lk.Event, 10)
	go func() {
		for e, err := range c.Watch(ctx, lk.EventFilter{Prefix: "jobs/"}) {
			if err != nil {
				t.Errorf("Watch: %v", err)
				return
			}
			events <- e
		}
	}()
	// The stream is open once an event made after Watch began arrives.
	var first lk.Event
	for i := 0; first.Kind == ""; i++ {
		if _, err := ts.AcquireOnce(ctx, fmt.Sprint("jobs/warm", i), client.AcquireOptions{Client: "w", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		select {
		case first = <-events:
		case <-time.After(200 * time.Millisecond):
		}
	}
	ts.AcquireOnce(ctx, "other", client.AcquireOptions{Client: "a", TTL: time.Minute})
	ts.AcquireOnce(ctx, "jobs/x", client.AcquireOptions{Client: "a", TTL: time.Minute})
	ts.Release(ctx, "a", "jobs/x")
	want := []string{"grant a jobs/x", "release a jobs/x"}
	for _, w := range want {
		var e lk.Event
		for e.Kind == "" || (e.Client != nil && *e.Client == "w") {
			select {
			case e = <-events:
			case <-time.After(5 * time.Second):
				t.Fatalf("no event %q", w)
			}
		}
		if got := fmt.Sprintf("%s %s %s", e.Kind, *e.Client, e.Lock); got != w {
			t.Errorf("event %q, want %q", got, w)
		}
	}
}

// TestWatchReconnects: when the stream ends, Watch says so and opens it
// again with Last-Event-ID; it passes reset and overflow on; it stops at an
// answer a retry cannot change.
func TestWatchReconnects(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	conn := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conn++
		n := conn
		asked = append(asked, r.URL.RawQuery+" "+r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		if n == 3 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error": "forbidden", "message": "no"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		switch n {
		case 1:
			fmt.Fprint(w, ": keep-alive\n\n")
			fmt.Fprint(w, "id: 1\nevent: grant\ndata: {\"id\":1,\"kind\":\"grant\",\"at\":5,\"lock\":\"L\",\"client\":\"a\",\"token\":1,\"mode\":\"exclusive\",\"expires_at\":15}\n\n")
			fmt.Fprint(w, "id: 2\nevent: overflow\ndata: {\"id\":2,\"kind\":\"overflow\",\"at\":6,\"lock\":null,\"client\":null,\"token\":null,\"mode\":null}\n\n")
		case 2:
			fmt.Fprint(w, "id: 10\nevent: reset\ndata: {\"id\":10,\"kind\":\"reset\",\"at\":7,\"lock\":null,\"client\":null,\"token\":null,\"mode\":null}\n\n")
			fmt.Fprint(w, "id: 11\nevent: release\ndata: {\"id\":11,\"kind\":\"release\",\"at\":8,\"lock\":\"L\",\"client\":\"a\",\"token\":1,\"mode\":\"exclusive\"}\n\n")
		}
	}))
	defer hs.Close()
	var got []string
	for e, err := range client.New(hs.URL).Watch(ctxT(t), lk.EventFilter{Lock: "L"}) {
		switch {
		case errors.Is(err, client.ErrReconnecting):
			got = append(got, "reconnecting")
		case err != nil:
			if !errors.Is(err, client.ErrForbidden) {
				t.Errorf("the last error %v, want forbidden", err)
			}
			got = append(got, "forbidden")
		default:
			got = append(got, fmt.Sprint(e.ID, e.Kind))
		}
	}
	if want := "1grant 2overflow reconnecting 10reset 11release reconnecting forbidden"; strings.Join(got, " ") != want {
		t.Errorf("Watch yielded %q, want %q", strings.Join(got, " "), want)
	}
	if want := "lock=L |lock=L 2|lock=L 11"; strings.Join(asked, "|") != want {
		t.Errorf("requests %q, want %q", strings.Join(asked, "|"), want)
	}
}
