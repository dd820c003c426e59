package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// storeFixture is a server with an auth file of three principals: team-a
// (client ids a*, its writes bounded to 2,000 bytes in all), team-b (b*),
// and the admin ops; the quota is the server's default per lock, and
// maxTotal in all.
type storeFixture struct {
	t   *testing.T
	url string
	hc  *http.Client
}

func startStore(t *testing.T, path string, maxTotal int64) *storeFixture {
	t.Helper()
	ps, err := auth.Parse([]byte(fmt.Sprintf(`{"principals": [
		{"name": "team-a", "token_sha256": %q, "clients": ["a*"], "role": "client", "max_store_bytes": 2000},
		{"name": "team-b", "token_sha256": %q, "clients": ["b*"], "role": "client"},
		{"name": "ops", "token_sha256": %q, "role": "admin"}]}`,
		auth.HashToken("tok-a"), auth.HashToken("tok-b"), auth.HashToken("tok-ops"))))
	if err != nil {
		t.Fatal(err)
	}
	rules := service.Config{StrictFencing: true, Quota: service.StoreQuota{
		MaxKeys: service.DefaultStoreMaxKeys, MaxBytes: service.DefaultStoreMaxBytes, MaxTotal: maxTotal}}
	srv := testutil.StartServer(t, path, engine.Options{Rules: rules, Clock: engine.NewManualClock(time.Unix(1000, 0))},
		server.Options{Authorizer: auth.New(ps, nil)})
	return &storeFixture{t: t, url: srv.URL, hc: &http.Client{Transport: apitest.New(t).Transport(t, nil)}}
}

// do sends a request with token and returns the status and the body.
func (f *storeFixture) do(token, method, path, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := f.hc.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(b))
}

// want sends a request and checks its status and that its body says says.
func (f *storeFixture) want(token, method, path, body string, status int, says string) string {
	f.t.Helper()
	st, got := f.do(token, method, path, body)
	if st != status || !strings.Contains(got, says) {
		f.t.Errorf("%s %s %s: HTTP %d %s, want %d with %s", method, path, body, st, got, status, says)
	}
	return got
}

// acquire takes lock for client and returns its token.
func (f *storeFixture) acquire(token, client, lock string) int64 {
	f.t.Helper()
	_, got := f.do(token, "POST", "/v1/acquire", fmt.Sprintf(`{"client":%q,"lock":%q,"ttl":100}`, client, lock))
	var res lk.AcquireResult
	if err := json.Unmarshal([]byte(got), &res); err != nil || res.Outcome != lk.Granted {
		f.t.Fatalf("acquire %s by %s: %s", lock, client, got)
	}
	return res.Token
}

// TestFullStoreNotGriefedShut is the report's attack: a principal fills a
// lock's store to its quota of keys and releases the lock. The next holder
// deletes keys with its own token and writes again; an admin clears the
// store; a stale token deletes nothing.
func TestFullStoreNotGriefedShut(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startStore(t, path, 0)
		tok := f.acquire("tok-b", "b1", "L")
		for i := range service.DefaultStoreMaxKeys {
			f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"k%d","value":"v","token":%d}`, i, tok), 200, `"ok"`)
		}
		f.want("tok-b", "POST", "/v1/release", `{"client":"b1","lock":"L"}`, 200, "released")

		next := f.acquire("tok-b", "b2", "L")
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"new","value":"v","token":%d}`, next), 409, "quota_exceeded")
		// As another principal's client: forbidden; with the token of
		// another client of the same principal: not granted to it.
		f.want("tok-a", "POST", "/v1/delete", fmt.Sprintf(`{"client":"b2","lock":"L","key":"k0","token":%d}`, next), 403, "forbidden")
		f.want("tok-b", "POST", "/v1/delete", fmt.Sprintf(`{"client":"b1","lock":"L","key":"k0","token":%d}`, next), 409, "token_not_granted")
		// The holder deletes a key, and writes a new one in its room.
		f.want("tok-b", "POST", "/v1/delete", fmt.Sprintf(`{"client":"b2","lock":"L","key":"k0","token":%d}`, next), 200, `"deleted":true`)
		f.want("tok-b", "POST", "/v1/delete", fmt.Sprintf(`{"client":"b2","lock":"L","key":"k0","token":%d}`, next), 200, `"deleted":false`)
		// The fence is at the new holder's token now: the old holder's
		// deletes nothing.
		f.want("tok-b", "POST", "/v1/delete", fmt.Sprintf(`{"client":"b1","lock":"L","key":"k1","token":%d}`, tok), 409, "stale_token")
		f.want("tok-b", "GET", "/v1/read?lock=L&key=k0", "", 200, `{"value":null}`)
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"new","value":"v","token":%d}`, next), 200, `"ok"`)
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"newer","value":"v","token":%d}`, next), 409, "quota_exceeded")

		// Only an admin clears a store; the fence stays.
		f.want("tok-b", "POST", "/v1/store/clear", `{"lock":"L"}`, 403, "forbidden")
		f.want("tok-ops", "POST", "/v1/store/clear", `{"lock":"L"}`, 200, fmt.Sprintf(`{"outcome":"ok","keys":%d,"bytes":%d}`,
			service.DefaultStoreMaxKeys, 3*10+4*90+5*900-3+4))
		f.want("tok-ops", "GET", "/v1/store?lock=L", "", 200, fmt.Sprintf(`"highest_token":%d,"key_count":0,"keys":[]`, next))
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"k1","value":"v","token":%d}`, tok), 409, "stale_token")
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"L","key":"newer","value":"v","token":%d}`, next), 200, `"ok"`)
		f.want("tok-ops", "POST", "/v1/store/clear", `{"lock":"nothing-here"}`, 200, `{"outcome":"ok","keys":0,"bytes":0}`)
	})
}

// TestStoreBoundsInAll: a principal's max_store_bytes bounds its writes
// over every lock, and --store-max-total the whole store's; each refusal
// is the quota's 409, overwriting within the bound passes, and a delete
// makes room again.
func TestStoreBoundsInAll(t *testing.T) {
	onEachDatabase(t, func(t *testing.T, backend, path string) {
		f := startStore(t, path, 5000)
		value := strings.Repeat("x", 498) // 500 bytes with a 2-byte key
		var toks []int64
		for i := range 4 {
			lock := fmt.Sprintf("A%d", i)
			toks = append(toks, f.acquire("tok-a", fmt.Sprintf("a%d", i), lock))
			f.want("tok-a", "POST", "/v1/write", fmt.Sprintf(`{"lock":%q,"key":"k%d","value":%q,"token":%d}`, lock, i, value, toks[i]), 200, `"ok"`)
		}
		// team-a holds 2,000 bytes over four locks: one more byte on a
		// fifth lock is over its bound.
		ta := f.acquire("tok-a", "a9", "A9")
		f.want("tok-a", "POST", "/v1/write", fmt.Sprintf(`{"lock":"A9","key":"k","value":"v","token":%d}`, ta), 409, "max_store_bytes")
		// Overwriting its own entry with one as long passes.
		f.want("tok-a", "POST", "/v1/write", fmt.Sprintf(`{"lock":"A0","key":"k0","value":%q,"token":%d}`, strings.Repeat("y", 498), toks[0]), 200, `"ok"`)
		f.want("tok-a", "POST", "/v1/delete", fmt.Sprintf(`{"client":"a1","lock":"A1","key":"k1","token":%d}`, toks[1]), 200, `"deleted":true`)
		f.want("tok-a", "POST", "/v1/write", fmt.Sprintf(`{"lock":"A9","key":"k","value":"v","token":%d}`, ta), 200, `"ok"`)

		// team-b has no bound of its own; the server's 5,000 bytes stop it.
		tb := f.acquire("tok-b", "b1", "B")
		for i := range 3 {
			f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"B","key":"k%d","value":%q,"token":%d}`, i, value, tb), 200, `"ok"`)
		}
		// 1,502 + 1,500 held; 1,996 more fit, 1,999 do not.
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"B","key":"big","value":%q,"token":%d}`, strings.Repeat("z", 1996), tb), 409, "--store-max-total")
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"B","key":"big","value":%q,"token":%d}`, strings.Repeat("z", 1995), tb), 200, `"ok"`)
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"B","key":"one","value":"v","token":%d}`, tb), 409, "quota_exceeded")
		// An admin's clear of team-a's lock frees team-a's bytes and the
		// server's.
		f.want("tok-ops", "POST", "/v1/store/clear", `{"lock":"A0"}`, 200, `"keys":1,"bytes":500`)
		f.want("tok-b", "POST", "/v1/write", fmt.Sprintf(`{"lock":"B","key":"one","value":"v","token":%d}`, tb), 200, `"ok"`)
	})
}

// TestDeleteBadRequests: delete's fields are checked as write's are.
func TestDeleteBadRequests(t *testing.T) {
	f := startStore(t, filepath.Join(t.TempDir(), "bad.db"), 0)
	for _, body := range []string{
		`{"lock":"L","key":"k","token":1}`,
		`{"client":"a1","key":"k","token":1}`,
		`{"client":"a1","lock":"L","token":1}`,
		`{"client":"a1","lock":"L","key":"k"}`,
		`{"client":"a1","lock":"L","key":"k","token":0}`,
		`{"client":"a1","lock":"L","key":"","token":1}`,
		`{"client":"a1","lock":"L","key":"k","token":"1"}`,
	} {
		f.want("tok-a", "POST", "/v1/delete", body, 400, "invalid_arguments")
	}
	f.want("tok-ops", "POST", "/v1/store/clear", `{}`, 400, "invalid_arguments")
	f.want("tok-ops", "GET", "/v1/store/clear?lock=L", "", 405, "method_not_allowed")
}
