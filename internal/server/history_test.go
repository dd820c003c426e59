package server_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestHistoryOverHTTP: GET /v1/history shows each lease of a lock with how
// it ended, a lapse at its expires_at even when the server retired it
// later, newest first, a page at a time; of a client, across its locks;
// a request without exactly one of lock and client, or with a before that
// is not a cursor, is refused. Every answer is checked against
// docs/openapi.json.
func TestHistoryOverHTTP(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startOn(t, path, 1000)
		_, v := f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
		expect(t, v, granted(1, 1000, 1010))
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 30})
		expect(t, v, `{"outcome": "queued", "position": 1}`)
		// a lapses at 1010; the clock is well past it when the server
		// looks.
		f.clock.Set(time.Unix(1015, 0))
		_, v = f.call("POST", "/v1/release", map[string]any{"client": "b", "lock": "L"})
		expect(t, v, `{"outcome": "released"}`)
		_, v = f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "M", "ttl": 100, "mode": "shared"})
		expect(t, v, granted(1, 1015, 1115))

		_, v = f.call("GET", "/v1/history?lock=L&limit=1", nil)
		expect(t, v, `{"grants": [{"lock": "L", "token": 2, "client": "b", "mode": "exclusive",
			"granted_at": 1010, "expires_at": 1040, "ended_at": 1015, "ended": "released"}], "next": "2"}`)
		_, v = f.call("GET", "/v1/history?lock=L&limit=1&before=2", nil)
		expect(t, v, `{"grants": [{"lock": "L", "token": 1, "client": "a", "mode": "exclusive",
			"granted_at": 1000, "expires_at": 1010, "ended_at": 1010, "ended": "lapsed"}], "next": null}`)

		_, v = f.call("GET", "/v1/history?client=a&limit=1", nil)
		res := as[lk.HistoryResult](t, v)
		if len(res.Grants) != 1 || res.Grants[0].Lock != "M" || res.Grants[0].Ended != nil || res.Next == nil {
			t.Fatalf("first page of a's history: %+v", res)
		}
		_, v = f.call("GET", "/v1/history?client=a&limit=1&before="+url.QueryEscape(*res.Next), nil)
		expect(t, v, `{"grants": [{"lock": "L", "token": 1, "client": "a", "mode": "exclusive",
			"granted_at": 1000, "expires_at": 1010, "ended_at": 1010, "ended": "lapsed"}], "next": null}`)
		_, v = f.call("GET", "/v1/history?lock=nothing", nil)
		expect(t, v, `{"grants": [], "next": null}`)

		for _, q := range []string{"", "?lock=L&client=a", "?lock=L&before=x", "?lock=L&before=", "?client=a&before=3",
			"?lock=L&limit=0", "?lock=L&limit=1001", "?lock="} {
			status, v := f.call("GET", "/v1/history"+q, nil)
			if status != http.StatusBadRequest {
				t.Errorf("GET /v1/history%s: HTTP %d %v, want 400", q, status, v)
				continue
			}
			expectError(t, status, v, lk.CodeInvalidArguments)
		}
	})
}
