package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestStoreOverHTTP: GET /v1/store lists a lock's keys in key order with
// the token of the write that stored each, a page at a time, with the
// lock's fence and key count; a lock never written has a null fence and no
// keys. Every answer is checked against docs/openapi.json.
func TestStoreOverHTTP(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
		for _, k := range []string{"k3", "k1", "k2"} {
			_, v := f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": k, "value": "v-" + k, "token": 1})
			expect(t, v, `{"outcome": "ok"}`)
		}
		f.call("POST", "/v1/release", map[string]any{"client": "a", "lock": "L"})
		f.clock.Set(time.Unix(1005, 0))
		f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 10})
		_, v := f.call("POST", "/v1/write", map[string]any{"lock": "L", "key": "k2", "value": "longer value", "token": 2})
		expect(t, v, `{"outcome": "ok"}`)

		_, v = f.call("GET", "/v1/store?lock=L&limit=2", nil)
		expect(t, v, `{"lock": "L", "highest_token": 2, "key_count": 3, "keys": [
			{"key": "k1", "token": 1, "written_at": 1000, "value_bytes": 4},
			{"key": "k2", "token": 2, "written_at": 1005, "value_bytes": 12}], "next": "k2"}`)
		_, v = f.call("GET", "/v1/store?lock=L&limit=2&after=k2", nil)
		expect(t, v, `{"lock": "L", "highest_token": 2, "key_count": 3, "keys": [
			{"key": "k3", "token": 1, "written_at": 1000, "value_bytes": 4}], "next": null}`)
		_, v = f.call("GET", "/v1/store?lock=never", nil)
		expect(t, v, `{"lock": "never", "highest_token": null, "key_count": 0, "keys": [], "next": null}`)

		for _, q := range []string{"", "?lock=", "?lock=L&limit=0", "?lock=L&limit=1001", "?lock=L&limit=x"} {
			status, v := f.call("GET", "/v1/store"+q, nil)
			expectError(t, status, v, lk.CodeInvalidArguments)
		}
	})
}

// TestGraphOverHTTP: GET /v1/graph answers the connected component around
// a lock or a client, across holds and waits, and nothing outside it; a
// request without exactly one of lock and client is refused.
func TestGraphOverHTTP(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		acquire := func(client, lock string) {
			t.Helper()
			if status, v := f.call("POST", "/v1/acquire", map[string]any{"client": client, "lock": lock, "ttl": 100}); status != http.StatusOK {
				t.Fatalf("acquire %s %s: HTTP %d %v", client, lock, status, v)
			}
		}
		// a holds L1, which b waits for; b holds L2, which c waits for;
		// d holds L3 alone.
		acquire("a", "L1")
		acquire("b", "L2")
		acquire("d", "L3")
		acquire("b", "L1")
		f.clock.Set(time.Unix(1002, 0))
		acquire("c", "L2")

		want := `{"locks": [{"lock": "L1", "waiting": 1}, {"lock": "L2", "waiting": 1}],
			"clients": [{"client": "a", "age": 1}, {"client": "b", "age": 2}, {"client": "c", "age": 4}],
			"holds": [{"lock": "L1", "client": "a", "mode": "exclusive", "token": 1, "expires_at": 1100},
			          {"lock": "L2", "client": "b", "mode": "exclusive", "token": 1, "expires_at": 1100}],
			"waits": [{"client": "b", "lock": "L1", "mode": "exclusive", "queued_at": 1000},
			          {"client": "c", "lock": "L2", "mode": "exclusive", "queued_at": 1002}],
			"cut": false}`
		_, v := f.call("GET", "/v1/graph?lock=L1", nil)
		expect(t, v, want)
		// From c, the same component, found in another order.
		_, v = f.call("GET", "/v1/graph?client=c", nil)
		g := as[lk.GraphResult](t, v)
		if len(g.Locks) != 2 || len(g.Clients) != 3 || len(g.Holds) != 2 || len(g.Waits) != 2 || g.Cut || g.Clients[0].Client != "c" {
			t.Errorf("graph around c: %+v", g)
		}
		_, v = f.call("GET", "/v1/graph?client=d", nil)
		expect(t, v, `{"locks": [{"lock": "L3", "waiting": 0}], "clients": [{"client": "d", "age": 3}],
			"holds": [{"lock": "L3", "client": "d", "mode": "exclusive", "token": 1, "expires_at": 1100}], "waits": [], "cut": false}`)
		_, v = f.call("GET", "/v1/graph?client=nobody", nil)
		expect(t, v, `{"locks": [], "clients": [{"client": "nobody", "age": 0}], "holds": [], "waits": [], "cut": false}`)

		for _, q := range []string{"", "?lock=L1&client=a", "?lock=", "?client="} {
			status, v := f.call("GET", "/v1/graph"+q, nil)
			expectError(t, status, v, lk.CodeInvalidArguments)
		}
	})
}

// TestGraphCut: a component larger than lk.MaxGraphNodes is cut to the
// nodes nearest the start, and says so; its edges join only nodes it holds.
func TestGraphCut(t *testing.T) {
	f := start(t, 1000)
	f.call("POST", "/v1/acquire", map[string]any{"client": "holder", "lock": "big", "ttl": 100})
	for i := range lk.MaxGraphNodes + 50 {
		f.call("POST", "/v1/acquire", map[string]any{"client": fmt.Sprintf("w%03d", i), "lock": "big", "ttl": 100})
	}
	_, v := f.call("GET", "/v1/graph?lock=big", nil)
	g := as[lk.GraphResult](t, v)
	if !g.Cut || len(g.Locks)+len(g.Clients) != lk.MaxGraphNodes {
		t.Fatalf("graph of %d waiters: cut %v, %d locks and %d clients; want cut, %d nodes",
			lk.MaxGraphNodes+50, g.Cut, len(g.Locks), len(g.Clients), lk.MaxGraphNodes)
	}
	in := map[string]bool{}
	for _, c := range g.Clients {
		in[c.Client] = true
	}
	for _, w := range g.Waits {
		if !in[w.Client] {
			t.Errorf("edge from %s, a client the graph does not hold", w.Client)
		}
	}
	// The nearest: the holder and the head of the queue.
	if !in["holder"] || !in["w000"] || in[fmt.Sprintf("w%03d", lk.MaxGraphNodes+49)] {
		t.Errorf("the cut graph does not hold the nodes nearest the lock")
	}
}

// TestLocksOldestWait: each item of /v1/locks carries how long the first in
// its queue has waited, by the server's clock, and none without waiters.
func TestLocksOldestWait(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 100})
		f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 100})
		f.call("POST", "/v1/acquire", map[string]any{"client": "c", "lock": "M", "ttl": 100})
		f.clock.Set(time.Unix(1007, 0))
		f.call("POST", "/v1/acquire", map[string]any{"client": "d", "lock": "L", "ttl": 100})
		_, v := f.call("GET", "/v1/locks", nil)
		expect(t, v, `{"locks": [{"lock": "L", "holders": [{"client": "a", "mode": "exclusive", "token": 1, "expires_at": 1100}], "waiting": 2, "oldest_wait_s": 7, "holder_count": 1}, {"lock": "M", "holders": [{"client": "c", "mode": "exclusive", "token": 1, "expires_at": 1100}], "waiting": 0, "holder_count": 1}], "next": null}`)
		// The head leaves: the next in line's wait counts.
		f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
		f.clock.Set(time.Unix(1010, 0))
		_, v = f.call("GET", "/v1/locks?prefix=L", nil)
		expect(t, v, `{"locks": [{"lock": "L", "holders": [{"client": "a", "mode": "exclusive", "token": 1, "expires_at": 1100}], "waiting": 1, "oldest_wait_s": 3, "holder_count": 1}], "next": null}`)
	})
}

// TestConsolePage: the console is served at / with a strict
// Content-Security-Policy and nosniff, its script and style beside it, to
// everyone (it holds no data); unknown paths, under /v1/ or not, still get
// the API's JSON 404.
func TestConsolePage(t *testing.T) {
	f := start(t, 1000)
	for path, ct := range map[string]string{"/": "text/html", "/console/app.js": "text/javascript", "/console/app.css": "text/css"} {
		resp, err := f.hc.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ct) || len(b) == 0 {
			t.Errorf("GET %s: HTTP %d, Content-Type %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
			"frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q allows something unsafe", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", path)
		}
		if resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("GET %s sets a cookie", path)
		}
	}
	for _, path := range []string{"/v1/nothing", "/nothing", "/console/", "/console/nothing.js", "/index.html"} {
		status, v := f.call("GET", path, nil)
		expectError(t, status, v, lk.CodeNotFound)
	}
}
