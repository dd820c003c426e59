package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestEventsScope: of the event stream, a client principal is shown only
// the events of its own client ids, with the other client ids in them
// null, and may not ask for another client's; a reader and an admin see
// everything; no token, no stream.
func TestEventsScope(t *testing.T) {
	ps, err := auth.Parse([]byte(authFile()))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), engine.Options{Rules: service.Config{Explain: true}})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(eng, server.Options{Authorizer: auth.New(ps, nil)})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {

		hs.CloseClientConnections()
		hs.Close()
		eng.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := client.New(hs.URL, client.WithBearerToken(adminToken))
	opts := func(c string) client.AcquireOptions { return client.AcquireOptions{Client: c, TTL: time.Minute} }
	admin.AcquireOnce(ctx, "L", opts("web-1"))
	admin.AcquireOnce(ctx, "L", opts("etl-1"))
	admin.Release(ctx, "web-1", "L")
	admin.AcquireOnce(ctx, "M", opts("etl-2")) // the last event: 5

	// seen replays the stream from its start, as token's principal,
	// until the last event or an error.
	seen := func(token string, f lk.EventFilter) ([]string, error) {
		t.Helper()
		var out []string
		for e, err := range client.New(hs.URL, client.WithBearerToken(token)).WatchFrom(ctx, f, 0) {
			if err != nil {
				return out, err
			}
			s := fmt.Sprintf("%d:%s:%s", e.ID, e.Kind, name(e.Client))
			for _, p := range e.Predecessors {
				s += "<" + name(p.Client)
			}
			out = append(out, s)
			if e.Lock == "M" {
				break
			}
		}
		return out, nil
	}
	for _, c := range []struct {
		token string
		f     lk.EventFilter
		want  string
	}{
		{clientToken, lk.EventFilter{}, "2:queue:etl-1 4:grant:etl-1<null 5:grant:etl-2"},
		{clientToken, lk.EventFilter{Client: "etl-2"}, "5:grant:etl-2"},
		{readerToken, lk.EventFilter{}, "1:grant:web-1 2:queue:etl-1 3:release:web-1 4:grant:etl-1<web-1 5:grant:etl-2"},
		{adminToken, lk.EventFilter{}, "1:grant:web-1 2:queue:etl-1 3:release:web-1 4:grant:etl-1<web-1 5:grant:etl-2"},
	} {
		got, err := seen(c.token, c.f)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("events as %.3s with %+v: %v (%v), want %s", c.token, c.f, got, err, c.want)
		}
	}
	if _, err := seen(clientToken, lk.EventFilter{Client: "web-1"}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("events of web-1 as etl (etl-*): %v, want forbidden", err)
	}
	if _, err := seen("", lk.EventFilter{}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("events without a token: %v, want unauthenticated", err)
	}
}

func name(c *string) string {
	if c == nil {
		return "null"
	}
	return *c
}
