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

// TestHistoryCLI: history LOCK prints one JSON line per grant, newest token
// first, across the server's pages; --limit stops early; --client prints a
// client's grants; anything but exactly one of LOCK and --client is a usage
// error (exit 2).
func TestHistoryCLI(t *testing.T) {
	bin := buildBinary(t)
	s := startCLIServer(t)
	ctx := context.Background()
	const n = lk.DefaultLocksLimit + 30 // more than a page
	for i := 0; i < n; i++ {
		who := fmt.Sprintf("c%d", i%3)
		if res, err := s.AcquireOnce(ctx, "L", client.AcquireOptions{Client: who, TTL: 60 * time.Second}); err != nil || res.Outcome != lk.Granted {
			t.Fatalf("acquire #%d: %+v, %v", i, res, err)
		}
		if _, err := s.Release(ctx, who, "L"); err != nil {
			t.Fatal(err)
		}
	}
	grants := func(args ...string) []lk.GrantRecord {
		t.Helper()
		r := runCLI(t, bin, s.url, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("leasekeeper %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		var out []lk.GrantRecord
		for _, line := range strings.SplitAfter(r.stdout, "\n") {
			if line == "" {
				continue
			}
			var g lk.GrantRecord
			if err := json.Unmarshal([]byte(line), &g); err != nil || !strings.HasSuffix(line, "}\n") {
				t.Fatalf("leasekeeper %s printed the line %q: %v", strings.Join(args, " "), line, err)
			}
			out = append(out, g)
		}
		return out
	}
	all := grants("history", "L")
	if len(all) != n {
		t.Fatalf("history L printed %d grants, want %d", len(all), n)
	}
	for i, g := range all {
		if g.Token != int64(n-i) || g.Ended == nil || *g.Ended != lk.EndReleased {
			t.Fatalf("line %d of history L: %+v, want token %d, released", i+1, g, n-i)
		}
	}
	if got := grants("history", "L", "--limit", "5"); len(got) != 5 || got[4].Token != n-4 {
		t.Errorf("history L --limit 5 printed %d grants: %+v", len(got), got)
	}
	mine := grants("history", "--client", "c1")
	if len(mine) != n/3 {
		t.Errorf("history --client c1 printed %d grants, want %d", len(mine), n/3)
	}
	for _, g := range mine {
		if g.Client != "c1" {
			t.Errorf("history --client c1 printed %+v", g)
		}
	}
	for _, args := range [][]string{{"history"}, {"history", "L", "--client", "c1"}, {"history", "L", "M"}} {
		if r := runCLI(t, bin, s.url, args...); r.code != 2 {
			t.Errorf("leasekeeper %s: exit %d, want 2 (usage)", strings.Join(args, " "), r.code)
		}
	}
}
