package auth_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestHistoryScope: of a lock's history, a client principal is shown only
// the grants to its own client ids; a reader and an admin see them all.
func TestHistoryScope(t *testing.T) {
	e := startServer(t)
	e.admin(t, "POST", "/v1/acquire", `{"client": "etl-1", "lock": "L", "ttl": 60}`)
	e.admin(t, "POST", "/v1/release", `{"client": "etl-1", "lock": "L"}`)
	e.admin(t, "POST", "/v1/acquire", `{"client": "web-1", "lock": "L", "ttl": 60}`)
	clients := func(authz string) []string {
		t.Helper()
		st, b := e.send(t, authz, "GET", "/v1/history?lock=L", "")
		if st != http.StatusOK {
			t.Fatalf("history of L: %d %s", st, b)
		}
		var res struct {
			Grants []struct {
				Client string `json:"client"`
			} `json:"grants"`
		}
		if err := json.Unmarshal([]byte(b), &res); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range res.Grants {
			out = append(out, g.Client)
		}
		return out
	}
	if got := clients("Bearer " + clientToken); len(got) != 1 || got[0] != "etl-1" {
		t.Errorf("history of L as etl (etl-*) shows %v, want only etl-1", got)
	}
	for _, who := range []string{readerToken, adminToken} {
		if got := clients("Bearer " + who); len(got) != 2 || got[0] != "web-1" || got[1] != "etl-1" {
			t.Errorf("history of L as reader or admin shows %v, want web-1 and etl-1", got)
		}
	}
}
