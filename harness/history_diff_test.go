package harness_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/model"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestHistoryDifferential runs TestDifferential's random sequences through
// the service and the reference model, and requires the service's grant
// history (the grants table, read with History) to be the model's: every
// token with its client, mode, granted_at and last expires_at, and for
// each lease that ended, how (released, lapsed, aborted) and when (a
// lapse at its expires_at, however late it was noticed); and each client's
// history, read in pages, to be the model's grants of that client in the
// order docs/api.md gives.
//
// LEASEKEEPER_DIFF_SEQUENCES and LEASEKEEPER_DIFF_SEED as for
// TestDifferential (a tenth of its sequences by default).
func TestHistoryDifferential(t *testing.T) {
	n := envInt(t, "LEASEKEEPER_DIFF_SEQUENCES", 300)
	if testing.Short() {
		n = 50
	}
	seed := uint64(envInt(t, "LEASEKEEPER_DIFF_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("%d sequences, seed %d (LEASEKEEPER_DIFF_SEED=%d reproduces them)", n, seed, seed)
	for i := 0; i < n; i++ {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		if !historiesAgree(t, genSequence(rng), service.Config{}, fmt.Sprintf("seed %d sequence %d", seed, i)) {
			return
		}
	}
}

// historyLocks are every lock name genSequence uses, in byte order, as
// Model.History lists them.
func historyLocks() []string {
	names := append([]string(nil), diffLocks...)
	for i := 0; i < 10; i++ {
		names = append(names, fmt.Sprintf("L%d", i))
	}
	slices.Sort(names)
	return names
}

func historiesAgree(t *testing.T, ops []any, cfg service.Config, label string) bool {
	t.Helper()
	ctx := context.Background()
	m := model.New()
	m.KeepHistory()
	for _, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		m.Step(b)
	}
	ts, ok := m.Clock()
	if !ok {
		return true // nothing ever ran
	}
	// History is an operation at ts: it retires the leases ended by ts
	// (at the end of time, a lease granted at ts). So does an inspect.
	m.Step(json.RawMessage(fmt.Sprintf(`["inspect", %d, "L"]`, ts)))
	svc := testutil.OpenDirect(t, repo.MemoryPath, cfg)
	defer svc.Close()
	if _, err := harness.Run(ctx, svc, ops); err != nil {
		t.Fatalf("%s: engine failed: %v", label, err)
	}
	var want strings.Builder
	for _, g := range m.History() {
		end := "live"
		if g.Ended != "" {
			end = fmt.Sprintf("%s@%d", g.Ended, g.EndedAt)
		}
		fmt.Fprintf(&want, "%s/%d %s %s %d-%d %s\n", g.Lock, g.Token, g.Client, g.Mode, g.GrantedAt, g.ExpiresAt, end)
	}
	var got strings.Builder
	for _, lock := range historyLocks() {
		res, err := engine.Do(svc, ctx, ts, lk.HistoryRequest{Lock: lock, Limit: lk.MaxLocksLimit}, service.History)
		if err != nil {
			t.Fatalf("%s: history of %s: %v", label, lock, err)
		}
		if res.Next != nil {
			t.Fatalf("%s: history of %s has more than a page", label, lock)
		}
		// By token, as the model lists them.
		for i := len(res.Grants) - 1; i >= 0; i-- {
			g := res.Grants[i]
			end := "live"
			if g.Ended != nil || g.EndedAt != nil {
				end = "half-ended"
				if g.Ended != nil && g.EndedAt != nil {
					end = fmt.Sprintf("%s@%d", *g.Ended, *g.EndedAt)
				}
			}
			fmt.Fprintf(&got, "%s/%d %s %s %d-%d %s\n", g.Lock, g.Token, g.Client, g.Mode, g.GrantedAt, g.ExpiresAt, end)
		}
	}
	if got.String() != want.String() {
		all, _ := json.Marshal(ops)
		t.Errorf("%s: the service's grant history:\n%sthe model's:\n%swhole sequence:\n%s", label, got.String(), want.String(), all)
		return false
	}
	return clientHistoriesAgree(t, svc, ts, m.History(), ops, label)
}

// clientHistoriesAgree requires each client's history, read in pages of
// three, to be the model's grants of that client, newest first by
// granted_at, then lock and token.
func clientHistoriesAgree(t *testing.T, svc *engine.Direct, ts int64, all []model.Grant, ops []any, label string) bool {
	t.Helper()
	byClient := map[string][]model.Grant{}
	for _, g := range all {
		byClient[g.Client] = append(byClient[g.Client], g)
	}
	for client, gs := range byClient {
		slices.SortFunc(gs, func(a, b model.Grant) int {
			return cmp.Or(cmp.Compare(b.GrantedAt, a.GrantedAt), cmp.Compare(b.Lock, a.Lock), cmp.Compare(b.Token, a.Token))
		})
		var want, got strings.Builder
		for _, g := range gs {
			fmt.Fprintf(&want, "%s/%d %d\n", g.Lock, g.Token, g.GrantedAt)
		}
		for _, g := range testutil.HistoryPages(t, svc, ts, lk.HistoryRequest{Client: client}, 3, nil) {
			fmt.Fprintf(&got, "%s/%d %d\n", g.Lock, g.Token, g.GrantedAt)
		}
		if got.String() != want.String() {
			b, _ := json.Marshal(ops)
			t.Errorf("%s: client %s's history, in pages of three:\n%sthe model's:\n%swhole sequence:\n%s", label, client, got.String(), want.String(), b)
			return false
		}
	}
	return true
}
