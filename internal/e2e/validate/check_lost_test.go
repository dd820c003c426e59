package validate_test

import (
	"slices"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
)

// TestLostChecksBite feeds CheckLost and CheckStalled hand-made records of
// clients that kept a lost lease too long and of a store that let a stalled
// holder overwrite its successor, and requires each reported, and the same
// records done right accepted.
func TestLostChecksBite(t *testing.T) {
	// History times from 0, wall times from 1e18: lapse is where the
	// first lease's expires_at falls on both.
	const exp, wall = 10, int64(1e18)
	lapse := int64(exp * time.Second)
	ms := int64(time.Millisecond)
	pair := func(lost, released, next int64) []validate.LeaseRecord {
		on := func(at int64) int64 {
			if at == 0 {
				return 0
			}
			return wall + at
		}
		e := wall/1e9 + exp
		return []validate.LeaseRecord{
			{Client: "a", Lock: "l", Token: 1, TTL: 3, GrantedAt: e - 3, ExpiresAt: e, Call: lapse - 3000*ms, Return: lapse - 2990*ms,
				Lost: lost, LostWall: on(lost), Released: released, ReleasedWall: on(released)},
			{Client: "b", Lock: "l", Token: 2, TTL: 3, GrantedAt: e, ExpiresAt: e + 3, Call: lapse - 2000*ms, Return: next,
				Released: next + 500*ms, ReleasedWall: on(next + 500*ms), Lost: next + 510*ms, LostWall: on(next + 510*ms)},
		}
	}
	for _, c := range []struct {
		name string
		recs []validate.LeaseRecord
		want []string
	}{
		{"lost before expiry", pair(lapse-100*ms, lapse+5000*ms, lapse+50*ms), nil},
		{"released before expiry", pair(lapse+5000*ms, lapse-100*ms, lapse+50*ms), nil},
		{"lost within the margin", pair(lapse+100*ms, 0, lapse+200*ms), nil},
		{"lost a second late", pair(lapse+1000*ms, 0, lapse+2000*ms), []string{validate.CheckLostBeforeExpiry}},
		{"lost after the successor's grant", pair(lapse+100*ms, 0, lapse+50*ms), []string{validate.CheckLostBeforeSuccessor}},
		{"never lost", pair(0, 0, lapse+50*ms), []string{validate.CheckLostBeforeSuccessor, validate.CheckLostBeforeExpiry}},
	} {
		var got []string
		for _, v := range validate.CheckLost(c.recs) {
			if !slices.Contains(got, v.Check) {
				got = append(got, v.Check)
			}
		}
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: reported %v, want %v", c.name, got, c.want)
		}
	}

	stalled := func(stale bool, final string, lost string) []validate.Violation {
		h := history.New()
		ok := lk.OK
		write := func(client, value string, token, call int64, out history.Output) {
			h.Record(history.Op{Input: history.Input{Kind: history.Write, Client: client, Lock: "l", Key: "k", Value: value, Token: token}, Output: out, Call: call, Return: call + 1})
		}
		write("a", "a1", 1, 10, history.Output{Outcome: ok})
		write("b", "b1", 2, 20, history.Output{Outcome: ok})
		late := history.Output{Err: lk.CodeStaleToken}
		if !stale {
			late = history.Output{Outcome: ok}
		}
		write("a", "a2", 1, 30, late)
		token := int64(2)
		if final == "a2" {
			token = 1
		}
		h.Record(history.Op{Input: history.Input{Kind: history.Read, Lock: "l", Key: "k", Final: true}, Output: history.Output{Value: &final, Token: token}, Call: 40, Return: 41})
		return validate.CheckStalled(h, validate.Stalled{Lock: "l", Holder: "a", Successor: "b", Lost: lost})
	}
	if vs := stalled(true, "b1", "lease expired"); len(vs) > 0 {
		t.Errorf("a fenced-out stalled holder reported: %v", vs)
	}
	for name, vs := range map[string][]validate.Violation{
		"a late write accepted":    stalled(false, "b1", "lease expired"),
		"the store kept the stale": stalled(true, "a2", "lease expired"),
		"no Lost":                  stalled(true, "b1", ""),
	} {
		if len(vs) == 0 || vs[0].Check != validate.CheckStalledFenced {
			t.Errorf("%s: reported %v, want %s", name, vs, validate.CheckStalledFenced)
		}
	}
}
