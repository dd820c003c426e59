package repo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStoreOwnersCounted: through writes by several owners (overwriting
// each other's keys), fenced deletes, stale tokens and clears, each lock's
// counts and each owner's bytes stay equal to a count of the values
// themselves, and the total is their sum.
func TestStoreOwnersCounted(t *testing.T) {
	ctx := context.Background()
	onEachDatabase(t, func(t *testing.T, name string, d *DB) {
		tx, err := d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(56, 78))
		values := []string{"v", "value", "été", strings.Repeat("x", 300), "日本語のテキスト"}
		owners := []string{"", "team-a", "team-b"}
		deleted, cleared := 0, 0
		for i := range 3000 {
			lock := fmt.Sprintf("L%d", rng.IntN(5))
			key := fmt.Sprintf("k%d", rng.IntN(20))
			token := int64(1 + rng.IntN(i/100+1))
			switch r := rng.IntN(100); {
			case r < 20:
				ok, gone, err := StoreValueDelete(tx, lock, key, token)
				if err != nil {
					t.Fatal(err)
				}
				if gone && !ok {
					t.Fatal("a delete refused by the fence deleted")
				}
				if gone {
					deleted++
				}
			case r < 21:
				if _, _, err := StoreClear(tx, lock); err != nil {
					t.Fatal(err)
				}
				cleared++
			default:
				value := values[rng.IntN(len(values))]
				ok, err := StoreFenceRaise(tx, lock, key, token, int64(len(key)+len(value)))
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					if err := StoreValuePut(tx, lock, key, value, owners[rng.IntN(len(owners))], token, 0); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if deleted == 0 || cleared == 0 {
			t.Fatalf("%d deletes and %d clears: the mix does not try both", deleted, cleared)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var bad []string
		if err := d.conn.SelectContext(ctx, &bad, `SELECT f.lock FROM store_fences f
			WHERE f.key_count <> (SELECT count(*) FROM store_values v WHERE v.lock = f.lock)
			   OR f.byte_count <> (SELECT coalesce(sum(octet_length(v.key) + octet_length(v.value)), 0) FROM store_values v WHERE v.lock = f.lock)`); err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("locks whose counts are not their values': %v", bad)
		}
		if err := d.conn.SelectContext(ctx, &bad, `SELECT o.owner FROM store_owners o
			WHERE o.byte_count <> (SELECT coalesce(sum(octet_length(v.key) + octet_length(v.value)), 0) FROM store_values v WHERE v.owner = o.owner)`); err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("owners whose bytes are not their values': %q", bad)
		}
		tx, err = d.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, o := range owners {
			mine, total, err := StoreUsageGet(tx, o)
			if err != nil {
				t.Fatal(err)
			}
			var want [2]int64
			if err := d.conn.QueryRowContext(ctx, d.conn.Rebind(`SELECT
				(SELECT coalesce(sum(octet_length(key) + octet_length(value)), 0) FROM store_values WHERE owner = ?),
				(SELECT coalesce(sum(octet_length(key) + octet_length(value)), 0) FROM store_values)`), o).Scan(&want[0], &want[1]); err != nil {
				t.Fatal(err)
			}
			if mine != want[0] || total != want[1] || total == 0 {
				t.Errorf("owner %q: usage %d of %d, its values %d of %d", o, mine, total, want[0], want[1])
			}
		}
	})
}
