package repo

// A randomized differential test of the reads of ends in end order
// (explain.go: endedAfter, GrantJoinedLive, GrantHoldTimes), which take
// the ends after a token other than their own from the partial index
// grants_ended_by_lock_order and the others from the index by token
// (migration 00014), against an answer computed in Go from the rows.

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

type rvRow struct {
	lock                          string
	token                         int64
	client, mode                  string
	grantedAt, expiresAt, endedAt int64
	ended                         string
	e                             sql.NullInt64
}

// rvItem is one row of an answer: key orders it, val is what a read returns.
type rvItem struct{ key, val string }

// rvCheck: got must be a valid answer of a read that sorts all by key
// (ties in any order) and keeps limit: group by group, the same multiset
// (the last group cut short: a sub-multiset).
func rvCheck(all []rvItem, limit int, got []string) error {
	want := min(limit, len(all))
	if len(got) != want {
		return fmt.Errorf("%d rows, want %d", len(got), want)
	}
	i := 0
	for i < want {
		j := i
		for j < len(all) && all[j].key == all[i].key {
			j++
		}
		group := map[string]int{}
		for _, it := range all[i:j] {
			group[it.val]++
		}
		end := min(j, want)
		for _, v := range got[i:end] {
			if group[v] == 0 {
				return fmt.Errorf("row %d %q not among the rows of key %s", i, v, all[i].key)
			}
			group[v]--
		}
		i = j
	}
	return nil
}

func rvQuery(t *testing.T, db *sql.DB, d dialect, text string, args ...any) []string {
	t.Helper()
	q, err := bind(d, text)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vs := make([]sql.NullString, len(cols))
		ps := make([]any, len(cols))
		for i := range vs {
			ps[i] = &vs[i]
		}
		if err := rows.Scan(ps...); err != nil {
			t.Fatal(err)
		}
		var b []string
		for _, v := range vs {
			if v.Valid {
				b = append(b, v.String)
			} else {
				b = append(b, "NULL")
			}
		}
		out = append(out, strings.Join(b, "|"))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func rvPred(r rvRow) rvItem {
	return rvItem{fmt.Sprintf("%020d/%020d", r.endedAt, r.token),
		fmt.Sprintf("%d|%s|%s|%d|%s", r.token, r.client, r.mode, r.endedAt, r.ended)}
}

// TestEndOrderReadsMatchModel fills grants_ended and locks with random
// rows for two locks (ended_after_token NULL, equal to the token, above
// it, below it; ended_at in ties or spread; a lock without its row) and
// checks every read, for every token and several limits and keeps, with
// the answer computed in Go: the same rows, in the same order but for
// ties of the order's key, which may come in any order. Each arm of each
// read failed it when left out.
func TestEndOrderReadsMatchModel(t *testing.T) {
	for _, c := range reopenable {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.path(t)
			d0, err := Open(context.Background(), dsn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			d0.Close()
			db, err := sql.Open(c.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			reads := 0
			for seed := uint64(1); seed <= rvSeeds; seed++ {
				reads += rvTrial(t, db, c.dialect, seed)
				if t.Failed() {
					break
				}
			}
			t.Logf("%d random tables, %d reads", rvSeeds, reads)
		})
	}
}

// rvSeeds is how many random tables each database gets.
const rvSeeds = 60

func rvTrial(t *testing.T, db *sql.DB, d dialect, seed uint64) int {
	r := rand.New(rand.NewPCG(seed, 14))
	for _, q := range []string{`DELETE FROM grants_ended`, `DELETE FROM locks`, `DELETE FROM leases`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tieHeavy := r.IntN(2) == 0
	pNull, pLess := r.Float64()*0.2, r.Float64()*0.15
	pSame := r.Float64()
	var rows []rvRow
	last := map[string]int64{}
	for _, lock := range []string{"L", "M"} {
		n := int64(r.IntN(40))
		last[lock] = n + int64(r.IntN(3))
		low := int64(r.IntN(int(n) + 1))
		for tok := low; tok <= n; tok++ {
			if tok == 0 || r.IntN(8) == 0 {
				continue
			}
			{ // one ended row per token: the reads rely on it
				row := rvRow{lock: lock, token: tok, client: fmt.Sprintf("c%d", r.IntN(1000)),
					mode: []string{"shared", "exclusive"}[r.IntN(2)], ended: []string{"released", "lapsed", "revoked"}[r.IntN(3)]}
				if tieHeavy {
					row.endedAt = int64(r.IntN(12))
				} else {
					row.endedAt = tok*10 + int64(r.IntN(25))
				}
				row.grantedAt = row.endedAt - int64(r.IntN(30))
				row.expiresAt = row.endedAt + 5
				switch x := r.Float64(); {
				case x < pNull:
				case x < pNull+pLess:
					row.e = sql.NullInt64{Int64: tok - 1 - int64(r.IntN(3)), Valid: true}
				case x < pNull+pLess+(1-pNull-pLess)*pSame:
					row.e = sql.NullInt64{Int64: tok, Valid: true}
				default:
					row.e = sql.NullInt64{Int64: min(tok+1+int64(r.IntN(4)), last[lock]+1), Valid: true}
				}
				rows = append(rows, row)
			}
		}
	}
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	ins, _ := bind(d, `INSERT INTO grants_ended (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	for _, row := range rows {
		var e any
		if row.e.Valid {
			e = row.e.Int64
		}
		if _, err := db.Exec(ins, row.lock, row.token, row.client, row.mode, row.grantedAt, row.expiresAt, row.endedAt, row.ended, e); err != nil {
			t.Fatal(err)
		}
	}
	insLock, _ := bind(d, `INSERT INTO locks (name, last_token) VALUES (?, ?)`)
	for lock, lt := range last {
		if lock == "M" && r.IntN(5) == 0 {
			continue // a lock without its row: NextPredecessors reads none
		}
		if _, err := db.Exec(insLock, lock, lt); err != nil {
			t.Fatal(err)
		}
	}
	reads := 0
	fail := func(what string, err error, got []string) {
		t.Errorf("seed %d (ties %v): %s: %v\ngot %v", seed, tieHeavy, what, err, got)
	}
	limits := []int{0, 1, 2, 3, 5, 100}
	for _, lock := range []string{"L", "M"} {
		lt := last[lock]
		// GrantsEndedAfter
		for a := int64(0); a <= lt+2; a++ {
			var all []rvItem
			for _, row := range rows {
				if row.lock == lock && row.e.Valid && row.e.Int64 == a && row.token <= a {
					all = append(all, rvPred(row))
				}
			}
			sort.SliceStable(all, func(i, j int) bool { return all[i].key < all[j].key })
			for _, l := range limits {
				got := rvQuery(t, db, d, registry[qGrantsEndedAfter].text(d), lock, a, l)
				reads++
				if err := rvCheck(all, l, got); err != nil {
					fail(fmt.Sprintf("GrantsEndedAfter(%s, %d, %d)", lock, a, l), err, got)
				}
			}
		}
		// NextPredecessors
		var lockRow int
		if err := db.QueryRow(mustBind(t, d, `SELECT count(*) FROM locks WHERE name = ?`), lock).Scan(&lockRow); err != nil {
			t.Fatal(err)
		}
		for _, keep := range []int64{1, 2, 3, 5, 17, 40, 100} {
			step := historyPruneStep(keep)
			var bound int64
			if lt+1 > keep {
				bound = (lt + 1 - keep) / step * step
			}
			var all []rvItem
			for _, row := range rows {
				if lockRow == 1 && row.lock == lock && row.e.Valid && row.e.Int64 == lt && row.token <= lt && row.token > bound {
					all = append(all, rvPred(row))
				}
			}
			sort.SliceStable(all, func(i, j int) bool { return all[i].key < all[j].key })
			for _, l := range limits {
				got := rvQuery(t, db, d, registry[qNextPredecessors].text(d), nextPredecessorsArgs(lock, keep, l)...)
				reads++
				if err := rvCheck(all, l, got); err != nil {
					fail(fmt.Sprintf("NextPredecessors(%s, keep %d, %d)", lock, keep, l), err, got)
				}
			}
		}
		// GrantJoinedLive
		for tok := int64(0); tok <= lt+2; tok++ {
			want := "0"
			for _, row := range rows {
				if row.lock == lock && row.e.Valid && row.e.Int64 >= tok && row.token < tok {
					want = "1"
				}
			}
			got := rvQuery(t, db, d, registry[qGrantJoinedLive].text(d), lock, tok)
			reads++
			if len(got) != 1 || got[0] != want {
				fail(fmt.Sprintf("GrantJoinedLive(%s, %d), want %s", lock, tok, want), nil, got)
			}
		}
		// GrantHoldTimes
		var all []rvItem
		for _, row := range rows {
			if row.lock == lock && row.e.Valid {
				// descending, ties on the instant by token: invert for an
				// ascending string sort
				all = append(all, rvItem{fmt.Sprintf("%020d/%020d/%020d", 1<<40-row.e.Int64, 1<<40-row.endedAt, 1<<40-row.token),
					fmt.Sprintf("%s|%d|%d|%d|%d", row.mode, row.endedAt-row.grantedAt, row.e.Int64, row.endedAt, row.token)})
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].key < all[j].key })
		for _, l := range []int{0, 1, 2, 3, 4, 5, 8, 20, 100} {
			got := rvQuery(t, db, d, registry[qGrantHoldTimes].text(d), lock, l)
			reads++
			if err := rvCheck(all, l, got); err != nil {
				fail(fmt.Sprintf("GrantHoldTimes(%s, %d)", lock, l), err, got)
			}
		}
	}
	return reads
}

func mustBind(t *testing.T, d dialect, text string) string {
	q, err := bind(d, text)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
