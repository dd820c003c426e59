package main

import "testing"

// TestCLIDeleteAndStoreClear: delete removes a key with its holder's token
// and refuses a stale one; store clear empties a lock's store and keeps
// its fence.
func TestCLIDeleteAndStoreClear(t *testing.T) {
	bin := buildBinary(t)
	s := startCLIServer(t)
	expect(t, bin, s.url, 0, `{"outcome":"granted","token":1,...`, "acquire", "L", "--client", "a", "--ttl", "60")
	expect(t, bin, s.url, 0, `{"outcome":"ok"}`, "write", "L", "k1", "v1", "--token", "1")
	expect(t, bin, s.url, 0, `{"outcome":"ok"}`, "write", "L", "k2", "v2", "--token", "1")
	expect(t, bin, s.url, 0, `{"outcome":"ok","deleted":true}`, "delete", "L", "k1", "--client", "a", "--token", "1")
	expect(t, bin, s.url, 0, `{"outcome":"ok","deleted":false}`, "delete", "L", "k1", "--client", "a", "--token", "1")
	expect(t, bin, s.url, 0, `{"value":null}`, "read", "L", "k1")
	expect(t, bin, s.url, 0, `{"outcome":"released"}`, "release", "L", "--client", "a")
	expect(t, bin, s.url, 0, `{"outcome":"granted","token":2,...`, "acquire", "L", "--client", "b", "--ttl", "60")
	expect(t, bin, s.url, 0, `{"outcome":"ok","deleted":false}`, "delete", "L", "none", "--client", "b", "--token", "2")
	expect(t, bin, s.url, 1, `{"error":"stale_token",...`, "delete", "L", "k2", "--client", "a", "--token", "1")
	expect(t, bin, s.url, 0, `{"outcome":"ok","keys":1,"bytes":4}`, "store", "clear", "L")
	expect(t, bin, s.url, 0, `{"value":null}`, "read", "L", "k2")
	expect(t, bin, s.url, 1, `{"error":"stale_token",...`, "write", "L", "k2", "again", "--token", "1")
	for _, args := range [][]string{
		{"delete", "L", "k2", "--token", "2"},
		{"delete", "L", "k2", "--client", "b"},
		{"delete", "L", "--client", "b", "--token", "2"},
		{"store", "clear"},
	} {
		if r := runCLI(t, bin, s.url, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, r.code)
		}
	}
}
