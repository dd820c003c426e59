package auth_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestExplanationsScope: with the auth file's principals, the client
// principal etl (etl-*) sees null for web-1 in the aborts of its acquire's
// answer; an admin, for its own acquire, sees every name.
func TestExplanationsScope(t *testing.T) {
	e := startServer(t)
	e.admin(t, "POST", "/v1/acquire", `{"client": "etl-1", "lock": "X", "ttl": 60}`)
	e.admin(t, "POST", "/v1/acquire", `{"client": "web-1", "lock": "Y", "ttl": 60}`)
	e.admin(t, "POST", "/v1/acquire", `{"client": "web-1", "lock": "X", "ttl": 60}`)
	st, b := e.send(t, "Bearer "+clientToken, "POST", "/v1/acquire", `{"client": "etl-1", "lock": "Y", "ttl": 60}`)
	if st != http.StatusOK {
		t.Fatalf("acquire: %d %s", st, b)
	}
	var res struct {
		Victims []string `json:"victims"`
		Aborts  []struct {
			Victim *string `json:"victim"`
			Cycle  []struct {
				Client *string `json:"client"`
			} `json:"cycle"`
		} `json:"aborts"`
	}
	if err := json.Unmarshal([]byte(b), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Aborts) != 1 || res.Aborts[0].Victim != nil || len(res.Aborts[0].Cycle) != 2 ||
		res.Aborts[0].Cycle[0].Client == nil || *res.Aborts[0].Cycle[0].Client != "etl-1" || res.Aborts[0].Cycle[1].Client != nil {
		t.Errorf("etl's acquire: %s; want web-1 shown as null, etl-1 by name", b)
	}

	// The same cycle, found by an admin's acquire: every name.
	e.admin(t, "POST", "/v1/acquire", `{"client": "etl-2", "lock": "P", "ttl": 60}`)
	e.admin(t, "POST", "/v1/acquire", `{"client": "web-2", "lock": "Q", "ttl": 60}`)
	e.admin(t, "POST", "/v1/acquire", `{"client": "web-2", "lock": "P", "ttl": 60}`)
	b = e.admin(t, "POST", "/v1/acquire", `{"client": "etl-2", "lock": "Q", "ttl": 60}`)
	res.Aborts = nil
	if err := json.Unmarshal([]byte(b), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Aborts) != 1 || res.Aborts[0].Victim == nil || *res.Aborts[0].Victim != "web-2" {
		t.Errorf("admin's acquire: %s; want every name", b)
	}
}
