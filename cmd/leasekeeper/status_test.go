package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
)

// status follows the server's pages of holds and prints them all in one
// object, next null.
func testCLIStatusPages(t *testing.T, bin string) {
	s := startCLIServer(t)
	ctx := context.Background()
	var names []string
	for i := range 2*lk.DefaultLocksLimit + 30 {
		names = append(names, fmt.Sprintf("jobs/%04d", i))
		if res, err := s.AcquireOnce(ctx, names[i], client.AcquireOptions{Client: "many", TTL: 120 * time.Second}); err != nil || res.Outcome != lk.Granted {
			t.Fatalf("acquire %s: %+v, %v", names[i], res, err)
		}
	}
	r := runCLI(t, bin, s.url, "status", "many")
	var st lk.StatusResult
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("status many: exit %d, stdout %q, stderr %q: %v", r.code, r.stdout, r.stderr, err)
	}
	var got []string
	for _, h := range st.Holds {
		got = append(got, h.Lock)
	}
	if st.Age != 1 || st.Next != nil || strings.Join(got, " ") != strings.Join(names, " ") || !strings.Contains(r.stdout, `"next":null`) {
		t.Errorf("status many printed age %d, next %v and %d holds %v; want age 1, next null and the %d in name order",
			st.Age, st.Next, len(got), got, len(names))
	}
}
