package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestReadsAheadDifferential runs the same random groups (acquires of
// both modes, releases, renews, revokes, over few clients and locks, so
// that they queue, hand over, lapse, abort on deadlocks and prune the
// history) on two runners on PostgreSQL: one sends no read ahead, the
// other sends them, through the committer's window or, harder on the
// dropping, every read of the group before each operation, whatever an
// earlier operation names. Every answer, explanations included, must be
// the same: a read kept that a write made untrue shows as a difference.
// TestReadsAhead names the cases one by one; this finds the ones not
// named.
func TestReadsAheadDifferential(t *testing.T) {
	for _, tc := range []struct {
		name           string
		window         bool
		clients, locks int
		ttl            int64 // the shortest; up to 5 s more
		seed           uint64
		keep           int64 // tokens a lock's history keeps
	}{
		{"every read, short leases", false, 8, 4, 1, 1, 3},
		{"every read, long leases, more names", false, 12, 10, 40, 2, 3},
		{"window, short leases", true, 8, 4, 1, 3, 3},
		{"window, long leases, more names", true, 12, 10, 40, 4, 3},
		// A history pruned in steps of 2 tokens (repo.historyPruneBound):
		// both runners prune alike, so this compares the reads ahead
		// only; TestPredecessorsKeptBetweenSteps checks the steps.
		{"every read, short leases, pruned in steps", false, 8, 2, 1, 5, 33},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runDifferential(t, tc.window, tc.clients, tc.locks, tc.ttl, tc.seed, tc.keep, 250)
		})
	}
}

// diffOp is one operation of a differential group.
type diffOp struct {
	kind         string // acquire, release, renew, revoke
	client, lock string
	ttl          int64
	mode         lk.Mode
}

// pending is op for r, with its read ahead; its answer (as JSON, with its
// error) is written to out, and its outcome to outcome.
func (o diffOp) pending(r *runner, out *string, outcome *lk.Outcome) *pending {
	answer := func(res any, err error) {
		j, _ := json.Marshal(res)
		*out = fmt.Sprintf("%s %s %s: %s %v", o.kind, o.client, o.lock, j, err)
		var a struct{ Outcome lk.Outcome }
		if err == nil && json.Unmarshal(j, &a) == nil {
			*outcome = a.Outcome
		}
	}
	p := &pending{}
	switch o.kind {
	case "acquire":
		q := lk.AcquireRequest{Client: o.client, Lock: o.lock, TTL: o.ttl, Mode: o.mode}
		p.ahead = service.AcquireAhead(&r.cfg, q)
		p.exec = func(ctx context.Context, ts int64) error {
			answer(exec(r, ctx, ts, q, service.Acquire))
			return nil
		}
	case "release":
		q := lk.ReleaseRequest{Client: o.client, Lock: o.lock}
		p.ahead = service.ReleaseAhead(q)
		p.exec = func(ctx context.Context, ts int64) error {
			answer(exec(r, ctx, ts, q, service.Release))
			return nil
		}
	case "renew":
		q := lk.RenewRequest{Client: o.client, Lock: o.lock, TTL: o.ttl}
		p.exec = func(ctx context.Context, ts int64) error {
			answer(exec(r, ctx, ts, q, service.Renew))
			return nil
		}
	case "revoke":
		q := lk.RevokeRequest{Client: o.client, Lock: o.lock}
		// A release's read of the lease, which a revoke's end of it may
		// take: kept rows of another operation's kind.
		p.ahead = service.ReleaseAhead(lk.ReleaseRequest{Client: o.client, Lock: o.lock})
		p.exec = func(ctx context.Context, ts int64) error {
			answer(exec(r, ctx, ts, q, service.Revoke))
			return nil
		}
	}
	return p
}

func runDifferential(t *testing.T, window bool, clients, locks int, ttl int64, seed uint64, keep int64, groups int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 19))
	ahead, plain := openTestRunner(t, pgtest.DSN(t)), openTestRunner(t, pgtest.DSN(t))
	for _, r := range []*runner{ahead, plain} {
		r.cfg.Explain = true
		r.numbered = true
		r.cfg.History.Keep = keep // pruned by count within the run
	}
	ca, cp := &committer{r: ahead}, &committer{r: plain}
	ts := int64(1000)
	var known [][2]string // client and lock of recent grants and waits
	tally := map[lk.Outcome]int{}
	for g := range groups {
		ts += rng.Int64N(3)
		ops := make([]diffOp, 1+rng.IntN(12))
		for i := range ops {
			o := diffOp{
				client: fmt.Sprintf("c%d", rng.IntN(clients)),
				lock:   fmt.Sprintf("L%d", rng.IntN(locks)),
				ttl:    ttl + rng.Int64N(6),
				mode:   lk.Exclusive,
			}
			if rng.IntN(3) == 0 {
				o.mode = lk.Shared
			}
			switch k := rng.IntN(10); {
			case k < 5:
				o.kind = "acquire"
			case k < 8:
				o.kind = "release"
			case k < 9:
				o.kind = "renew"
			default:
				o.kind = "revoke"
			}
			if o.kind != "acquire" && len(known) > 0 && rng.IntN(4) != 0 {
				k := known[rng.IntN(len(known))]
				o.client, o.lock = k[0], k[1]
			}
			ops[i] = o
		}
		outA, outP := make([]string, len(ops)), make([]string, len(ops))
		outcomes, ignored := make([]lk.Outcome, len(ops)), make([]lk.Outcome, len(ops))
		ga, gp := make([]*pending, len(ops)), make([]*pending, len(ops))
		var all []repo.Warm
		for i, o := range ops {
			ga[i], gp[i] = o.pending(ahead, &outA[i], &ignored[i]), o.pending(plain, &outP[i], &outcomes[i])
			gp[i].ahead = repo.Warm{}
			all = append(all, ga[i].ahead)
		}
		ca.clock, cp.clock = NewManualClock(time.Unix(ts, 0)), NewManualClock(time.Unix(ts, 0))
		var errA error
		if window {
			errA = ahead.groupRun(ctx, ca.window(ga, 0), func() { ca.runAll(ctx, ga) })
		} else {
			errA = ahead.groupRun(ctx, all, func() {
				for i, p := range ga {
					if i > 0 {
						ahead.sendAhead(all[i:])
					}
					ca.run(ctx, p)
				}
			})
		}
		errP := plain.groupRun(ctx, nil, func() { cp.runAll(ctx, gp) })
		if fmt.Sprint(errA) != fmt.Sprint(errP) {
			t.Fatalf("seed %d, group %d: the group failed with %v, without reads ahead with %v", seed, g, errA, errP)
		}
		for i := range ops {
			if outA[i] != outP[i] || fmt.Sprint(ga[i].err) != fmt.Sprint(gp[i].err) {
				for j := range ops {
					t.Logf("%d: with reads ahead %s | without %s", j, outA[j], outP[j])
				}
				t.Fatalf("seed %d, group %d, operation %d: with reads ahead %s %v, without %s %v",
					seed, g, i, outA[i], ga[i].err, outP[i], gp[i].err)
			}
			tally[outcomes[i]]++
			if ops[i].kind == "acquire" && (outcomes[i] == lk.Granted || outcomes[i] == lk.Queued) {
				known = append(known, [2]string{ops[i].client, ops[i].lock})
				if len(known) > 40 {
					known = known[1:]
				}
			}
		}
	}
	t.Logf("outcomes: %v", tally)
	// The run must have made what it is there to check.
	for _, o := range []lk.Outcome{lk.Granted, lk.Queued, lk.Released, lk.Withdrawn} {
		if tally[o] == 0 {
			t.Errorf("no operation was %s: the groups do not check what they are for", o)
		}
	}
}
