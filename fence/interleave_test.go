package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/fence"
)

// The interleaving test: two transactions, an older job's (A) and a newer
// one's (B), each begin, check, write a row of the job's own and commit,
// in every order of those eight steps (70 orders), on every dialect at its
// default isolation level. A step that does not finish within settle is
// taken to wait for a lock: the order goes on with the other transaction's
// steps, and the waiting one runs its remaining steps on its own once it
// is let through.
//
// Whatever the order, the newer job is never refused and its row lands;
// the older one either checked first, and then committed before the newer
// one's check returned, or was refused with a *StaleError naming both
// tokens, its row rolled back. The fence ends at B's token.

// settle is how long a step may take before it counts as waiting.
const settle = 60 * time.Millisecond

type stepKind int

const (
	stepBegin stepKind = iota
	stepCheck
	stepWrite
	stepCommit
)

func (k stepKind) String() string { return [...]string{"begin", "check", "write", "commit"}[k] }

// variant is one setting of the interleavings.
type variant struct {
	name string
	// seed, if not 0, is a token that wrote to the resource before: the row
	// exists already. Else A and B race to create it.
	seed int64
	// aWritesFirst: A writes its row before its check, in the same
	// transaction; the check's refusal must roll that write back too.
	aWritesFirst bool
	// readFirst: each begin also reads the job's table, so that the
	// transaction has a snapshot from before the other's commit when it
	// checks (MySQL's REPEATABLE READ keeps it for the transaction).
	readFirst bool
}

var variants = []variant{
	{name: "new-row"},
	{name: "existing-row", seed: 1},
	{name: "write-before-check", aWritesFirst: true},
	{name: "read-before-check", seed: 1, readFirst: true},
}

func TestCheckInterleavings(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend, db *sql.DB) {
		for _, v := range variants {
			if v.readFirst && b.name == "sqlite-deferred" {
				// A deferred transaction that has read cannot wait for the
				// write lock: its snapshot would be older than the
				// holder's commit. It fails with SQLITE_BUSY, never
				// passes wrongly, but the newer job could fail too: hence
				// BEGIN IMMEDIATE, or the check first (docs/fencing.md).
				continue
			}
			t.Run(v.name, func(t *testing.T) {
				seen := map[string]int{}
				for i, order := range interleavings(4, 4) {
					outcome := runInterleaving(t, b, db, v, fmt.Sprintf("%s-%d", v.name, i), order)
					seen[outcome]++
				}
				t.Logf("%s/%s: %d orders: %v", b.name, v.name, len(interleavings(4, 4)), seen)
				// Some orders let the older job through, some refused it;
				// in some the newer job waited for the older one's lock
				// and in some (but when the older one wrote first, taking
				// the lock before its check) the other way round. A step
				// slowed by the machine's load may also count as a wait:
				// waits can only be added, so the checks look for them.
				count := func(parts ...string) (n int) {
					for outcome, k := range seen {
						all := true
						for _, p := range parts {
							all = all && strings.Contains(outcome, p)
						}
						if all {
							n += k
						}
					}
					return n
				}
				want := [][]string{{"A-passed"}, {"A-stale"}, {"A-passed", "B-waited"}}
				if !v.aWritesFirst {
					want = append(want, []string{"A-stale", "A-waited"})
				}
				for _, w := range want {
					if count(w...) == 0 {
						t.Errorf("no order ended %v: %v", w, seen)
					}
				}
			})
		}
	})
}

// interleavings returns every order of a steps of A and b steps of B, as
// strings of 'A' and 'B'.
func interleavings(a, b int) []string {
	if a == 0 {
		return []string{strings.Repeat("B", b)}
	}
	if b == 0 {
		return []string{strings.Repeat("A", a)}
	}
	var out []string
	for _, s := range interleavings(a-1, b) {
		out = append(out, "A"+s)
	}
	for _, s := range interleavings(a, b-1) {
		out = append(out, "B"+s)
	}
	return out
}

// event is a step's start or end, numbered in the order they happened.
type event struct {
	who  byte
	kind stepKind
	end  bool
	err  error
}

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	return len(r.events) - 1
}

// job runs one transaction's steps, each when told to, or all the rest on
// its own once freed.
type job struct {
	who      byte
	tok      fence.Token
	steps    []stepKind
	next     chan struct{} // one per step to start
	free     chan struct{} // closed: run the rest without waiting
	done     chan struct{} // closed when the job has finished
	stepDone chan struct{} // one per finished step

	tx        *sql.Tx
	checkErr  error
	err       error // a failure other than the check's refusal
	retries   int
	waited    bool // a step of it outlasted settle: it waited for the other's lock
	readFirst bool
}

func runInterleaving(t *testing.T, b backend, db *sql.DB, v variant, resource string, order string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aTok, bTok := int64(1), int64(2)
	if v.seed != 0 {
		aTok, bTok = v.seed+1, v.seed+2
		err := fence.InTx(ctx, db, b.dialect, fence.Token{Service: "svc", Lock: "L", Token: v.seed}, resource,
			func(*sql.Tx) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	aSteps := []stepKind{stepBegin, stepCheck, stepWrite, stepCommit}
	if v.aWritesFirst {
		aSteps = []stepKind{stepBegin, stepWrite, stepCheck, stepCommit}
	}
	jobs := map[byte]*job{
		'A': newJob('A', fence.Token{Service: "svc", Lock: "L", Token: aTok}, aSteps),
		'B': newJob('B', fence.Token{Service: "svc", Lock: "L", Token: bTok}, []stepKind{stepBegin, stepCheck, stepWrite, stepCommit}),
	}
	for _, j := range jobs {
		j.readFirst = v.readFirst
		go j.run(ctx, b, db, resource, rec)
	}
	for i := 0; i < len(order); i++ {
		j := jobs[order[i]]
		select {
		case <-j.free:
			continue // waiting for a lock, or finished: it runs on its own
		default:
		}
		select {
		case j.next <- struct{}{}:
		case <-j.done:
			continue
		}
		select {
		case <-j.stepDone:
		case <-time.After(settle):
			j.waited = true
			close(j.free)
		}
	}
	for _, j := range jobs {
		select {
		case <-j.free:
		default:
			close(j.free)
		}
	}
	for _, j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
			t.Fatalf("%s %s: the transactions did not finish: a deadlock the database did not break?\n%s", resource, order, describe(rec))
		}
	}
	A, B := jobs['A'], jobs['B']
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, order %s: %s\nsteps:\n%s", resource, order, fmt.Sprintf(format, args...), describe(rec))
	}
	if A.err != nil || B.err != nil {
		fail("A: %v; B: %v", A.err, B.err)
	}
	if B.checkErr != nil {
		fail("the newer job was refused: %v", B.checkErr)
	}
	writers := readWriters(t, b, db, resource)
	token := readToken(t, b, db, resource)
	if token != bTok {
		fail("the fence holds token %d, want the newer job's %d", token, bTok)
	}
	var outcome string
	switch {
	case A.checkErr == nil:
		// A passed: it must have committed before B's check returned,
		// which then saw A's token.
		aCommit := index(rec, 'A', stepCommit, false)
		bCheck := index(rec, 'B', stepCheck, true)
		if aCommit < 0 || bCheck < 0 || aCommit > bCheck {
			fail("the older job passed its check, but did not commit before the newer job's check returned")
		}
		if !slices.Equal(writers, []string{"A", "B"}) {
			fail("rows written by %v, want A's then B's", writers)
		}
		outcome = "A-passed"
	default:
		var stale *fence.StaleError
		if !errors.As(A.checkErr, &stale) || !errors.Is(A.checkErr, fence.ErrStale) {
			fail("the older job's check failed with %v, not a *StaleError", A.checkErr)
		}
		if stale.Token != aTok || stale.Newer != bTok || stale.Resource != resource || stale.Lock != "L" {
			fail("the refusal says %+v, want token %d refused by %d on %s", *stale, aTok, bTok, resource)
		}
		if !slices.Equal(writers, []string{"B"}) {
			fail("rows written by %v, want B's only: the refused transaction's writes must roll back", writers)
		}
		outcome = "A-stale"
	}
	for _, j := range []*job{A, B} {
		if j.waited {
			outcome += fmt.Sprintf(",%c-waited", j.who)
		}
		if j.retries > 0 {
			outcome += fmt.Sprintf(",%c-retried", j.who)
		}
	}
	return outcome
}

func newJob(who byte, tok fence.Token, steps []stepKind) *job {
	return &job{who: who, tok: tok, steps: steps, next: make(chan struct{}), free: make(chan struct{}),
		done: make(chan struct{}), stepDone: make(chan struct{}, 64)}
}

func (j *job) run(ctx context.Context, b backend, db *sql.DB, resource string, rec *recorder) {
	defer close(j.done)
	defer func() {
		if j.tx != nil {
			j.tx.Rollback()
		}
	}()
	for i := 0; i < len(j.steps); i++ {
		select {
		case <-j.next:
		case <-j.free:
		case <-ctx.Done():
			return
		}
		k := j.steps[i]
		rec.add(event{who: j.who, kind: k})
		err := j.step(ctx, b, db, resource, k)
		rec.add(event{who: j.who, kind: k, end: true, err: err})
		j.stepDone <- struct{}{}
		switch {
		case err == nil:
			continue
		case k == stepCheck && fence.Retryable(err) && j.retries < fence.MaxAttempts:
			// The database broke a deadlock or a serialization conflict
			// by voiding this transaction: run it again from the start,
			// on its own (InTx does the same).
			j.tx.Rollback()
			j.tx = nil
			j.retries++
			i = -1
			select {
			case <-j.free:
			default:
				close(j.free)
			}
		case k == stepCheck:
			j.checkErr = err
			return // the job stops; the deferred rollback voids its writes
		default:
			j.err = fmt.Errorf("%s: %w", k, err)
			return
		}
	}
}

func (j *job) step(ctx context.Context, b backend, db *sql.DB, resource string, k stepKind) error {
	var err error
	switch k {
	case stepBegin:
		j.tx, err = db.BeginTx(ctx, nil)
		if err == nil && j.readFirst {
			var n int
			err = j.tx.QueryRowContext(ctx, `SELECT count(*) FROM job_rows`).Scan(&n)
		}
	case stepCheck:
		err = fence.Check(ctx, j.tx, b.dialect, j.tok, resource)
	case stepWrite:
		_, err = j.tx.ExecContext(ctx, placeholders(b.dialect, `INSERT INTO job_rows (resource, writer) VALUES (?, ?)`),
			resource, string(j.who))
	case stepCommit:
		err = j.tx.Commit()
		j.tx = nil
	}
	return err
}

// index is the position of who's step k's start (or end) in rec, -1 if none.
func index(rec *recorder, who byte, k stepKind, end bool) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	at := -1
	for i, e := range rec.events {
		if e.who == who && e.kind == k && e.end == end {
			at = i // the last: after a retry, the one that counted
		}
	}
	return at
}

func describe(rec *recorder) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var s strings.Builder
	for _, e := range rec.events {
		what := "start"
		if e.end {
			what = "end"
		}
		fmt.Fprintf(&s, "  %c %s %s", e.who, e.kind, what)
		if e.err != nil {
			fmt.Fprintf(&s, ": %v", e.err)
		}
		s.WriteByte('\n')
	}
	return s.String()
}

func readWriters(t *testing.T, b backend, db *sql.DB, resource string) []string {
	t.Helper()
	rows, err := db.Query(placeholders(b.dialect, `SELECT writer FROM job_rows WHERE resource = ? ORDER BY writer`), resource)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var w string
		if err := rows.Scan(&w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readToken(t *testing.T, b backend, db *sql.DB, resource string) int64 {
	t.Helper()
	var tok int64
	err := db.QueryRow(placeholders(b.dialect, `SELECT token FROM leasekeeper_fence WHERE service_id = ? AND lock_name = ? AND resource = ?`),
		"svc", "L", resource).Scan(&tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
