package server_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/apitest"
	"github.com/leasekeeper/leasekeeper/internal/auth"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/server"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
)

// TestOverRateRenewsOnlyWhatItHolds: renew and release stay unlimited for
// what a principal's clients hold, however fast, but renews of a lock the
// client does not hold and releases of nothing, sent fast, put the
// principal over its rate, and then are refused with 429 before they reach
// the committer.
func TestOverRateRenewsOnlyWhatItHolds(t *testing.T) {
	ps, err := auth.Parse([]byte(fmt.Sprintf(`{"principals": [
		{"name": "team-a", "token_sha256": %q, "clients": ["a*"], "role": "client", "rate": 5}]}`, auth.HashToken("tok-a"))))
	if err != nil {
		t.Fatal(err)
	}
	srv := testutil.StartServer(t, filepath.Join(t.TempDir(), "rate.db"),
		engine.Options{Clock: engine.NewManualClock(time.Unix(1000, 0))}, server.Options{Authorizer: auth.New(ps, nil)})
	f := &storeFixture{t: t, url: srv.URL, hc: &http.Client{Transport: apitest.New(t).Transport(t, nil)}}
	f.acquire("tok-a", "a1", "L")

	counts := map[int]int{}
	start := time.Now()
	for range 60 {
		st, _ := f.do("tok-a", "POST", "/v1/renew", `{"client":"a1","lock":"X","ttl":100}`)
		counts[st]++
		st, _ = f.do("tok-a", "POST", "/v1/release", `{"client":"a1","lock":"Y"}`)
		counts[st]++
		// The lease the client holds is renewed every time, over the
		// rate or not.
		f.want("tok-a", "POST", "/v1/renew", `{"client":"a1","lock":"L","ttl":100}`, 200, "renewed")
	}
	// At most the bucket (5) and what it refilled while the loop ran (5 a
	// second) got through; the loop takes well under a second, but need
	// not on a busy machine.
	if want := 120 - 6 - int(5*time.Since(start).Seconds()); counts[http.StatusTooManyRequests] < want {
		t.Errorf("120 renews and releases of nothing: %v by status, want at least %d refused with 429", counts, want)
	}
	// The bucket refills one request every 200 ms, and a slow run (-race,
	// a busy machine) may have let one through since the loop's last
	// charge; each one let through is charged, so a 429 comes within a
	// few.
	st, got := 0, ""
	for range 5 {
		if st, got = f.do("tok-a", "POST", "/v1/renew", `{"client":"a1","lock":"X","ttl":100}`); st != http.StatusConflict {
			break
		}
	}
	if st != http.StatusTooManyRequests || !strings.Contains(got, "holds nothing to renew on X") {
		t.Errorf("renew of X over the rate: HTTP %d %s, want 429 with holds nothing to renew on X", st, got)
	}
	f.want("tok-a", "POST", "/v1/release", `{"client":"a1","lock":"L"}`, 200, "released")
}
