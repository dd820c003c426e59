package server_test

import (
	"net/http"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

// TestStaleReport: POST /v1/stale takes a refusal by a fence in a job's own
// database, about a token granted to the reporting client on that lock,
// and makes it a fence_stale event; it changes no state. A token not
// granted to that client, or never granted, is token_not_granted.
func TestStaleReport(t *testing.T) {
	f := start(t, 1000)
	st := openEvents(t, f.url, "", nil)
	f.call("POST", "/v1/acquire", map[string]any{"client": "a", "lock": "L", "ttl": 10})
	f.call("POST", "/v1/release", map[string]any{"client": "a", "lock": "L"})
	f.call("POST", "/v1/acquire", map[string]any{"client": "b", "lock": "L", "ttl": 10})
	status, v := f.call("POST", "/v1/stale", map[string]any{"client": "a", "lock": "L", "token": 1, "newer": 2, "resource": "warehouse.orders"})
	if status != http.StatusOK {
		t.Fatalf("report: HTTP %d %v", status, v)
	}
	expect(t, v, `{"outcome": "ok"}`)
	got := st.until(4, 5*time.Second)
	expectKinds(t, got, "1:grant:a:L", "2:release:a:L", "3:grant:b:L", "4:fence_stale:a:L")
	want := `{"id":4,"kind":"fence_stale","at":1000,"lock":"L","client":"a","token":1,"mode":null,"highest":2,"resource":"warehouse.orders"}`
	if len(got) == 4 && got[3].data != want {
		t.Errorf("event:\n got %s\nwant %s", got[3].data, want)
	}
	for _, c := range []struct {
		body map[string]any
		code lk.ErrorCode
	}{
		{map[string]any{"client": "b", "lock": "L", "token": 1, "newer": 2, "resource": "r"}, lk.CodeTokenNotGranted},  // a's token
		{map[string]any{"client": "a", "lock": "L", "token": 7, "newer": 8, "resource": "r"}, lk.CodeTokenNotGranted},  // never granted
		{map[string]any{"client": "a", "lock": "M", "token": 1, "newer": 2, "resource": "r"}, lk.CodeTokenNotGranted},  // another lock
		{map[string]any{"client": "a", "lock": "L", "token": 1, "newer": 1, "resource": "r"}, lk.CodeInvalidArguments}, // not newer
		{map[string]any{"client": "a", "lock": "L", "token": 1, "newer": 2}, lk.CodeInvalidArguments},                  // no resource
	} {
		status, v := f.call("POST", "/v1/stale", c.body)
		expectError(t, status, v, c.code)
	}
	// Nothing changed: b still holds L with token 2.
	_, v = f.call("GET", "/v1/inspect?lock=L", nil)
	expect(t, v, `{"lock": "L", "holders": [{"client": "b", "mode": "exclusive", "token": 2, "expires_at": 1010}], "queue": [], "holder_count": 1, "queue_length": 0}`)
}
