package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
)

// The pause-server scenario: the server stopped (SIGSTOP) for twice the
// ttl of the leases held through the Go client, then continued. The
// leases' keep-alives cannot reach it, so each Lease must report Lost
// before its lease can have ended on the server (CheckLost), and the
// lapse-free workload running beside them must find nothing acknowledged
// lost and its tokens still growing (Verify).

const (
	pauseTTL    = 3 * time.Second // the Go client's leases
	pauseFor    = 2 * pauseTTL
	pauseAt     = 2 * time.Second // from the start of the load
	pauseAfter  = 3 * time.Second // of load after the resume
	leaseLocks  = 3
	leaseWorker = 6
)

var _ = register(scenario{
	name: "pause-server",
	run: func(t *testing.T, failpoints []string) validate.Result {
		r, _ := pauseServer(t, failpoints)
		return r
	},
})

// TestPauseServer: six workers take three locks through the Go client's
// Lease (ttl 3 s, acquiring at once and trying again while the lock is
// taken, but never while the server is stopped), write under it every 150 ms until their work is done or Lost is
// closed, and release; a lapse-free workload runs beside them. Two seconds
// in, the server is stopped for 6 s, then continued. Every check must pass,
// the pause must have made at least one lease lapse, and, to show that
// CheckLost bites on this very run, its records doctored with a Lost a
// second late, or after the successor's grant, must be reported.
func TestPauseServer(t *testing.T) {
	r, recs := pauseServer(t, nil)
	r.RequireOK(t)
	var lost []int // leases lost while held
	for i, rec := range recs {
		if rec.Lost > 0 && (rec.Released == 0 || rec.Lost < rec.Released) {
			lost = append(lost, i)
		}
	}
	if len(lost) == 0 {
		t.Fatalf("no lease was lost during the pause: the Lost checks saw nothing to check")
	}
	for _, i := range lost {
		// A client that forgot the second the server's clock rounds away.
		late := slices.Clone(recs)
		late[i].Released, late[i].ReleasedWall = 0, 0
		late[i].LostWall = time.Unix(recs[i].ExpiresAt, 0).Add(time.Second).UnixNano()
		if vs := validate.CheckLost(late); !slices.ContainsFunc(vs, func(v validate.Violation) bool { return v.Check == validate.CheckLostBeforeExpiry }) {
			t.Errorf("a Lost a second past expires_at was not reported: %v (got %v)", late[i], vs)
		}
		// A Lost seen only after the successor's acquire returned.
		j := slices.IndexFunc(recs, func(s validate.LeaseRecord) bool {
			return s.Lock == recs[i].Lock && s.Token > recs[i].Token &&
				!slices.ContainsFunc(recs, func(m validate.LeaseRecord) bool {
					return m.Lock == s.Lock && m.Token > recs[i].Token && m.Token < s.Token
				})
		})
		if j < 0 {
			continue
		}
		after := slices.Clone(recs)
		after[i].Released, after[i].ReleasedWall = 0, 0
		after[i].Lost = recs[j].Return + int64(time.Millisecond)
		if vs := validate.CheckLost(after); !slices.ContainsFunc(vs, func(v validate.Violation) bool { return v.Check == validate.CheckLostBeforeSuccessor }) {
			t.Errorf("a Lost after the successor's grant was answered was not reported: %v (got %v)", after[i], vs)
		}
	}
}

// pauseServer runs the scenario and returns the report, with CheckLost's
// violations, and the leases' records.
func pauseServer(t *testing.T, failpoints []string) (validate.Result, []validate.LeaseRecord) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	h := history.New()
	c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints})
	s := c.Servers[0]
	w := traffic.Workload{Workers: 4, Locks: 2, Duration: pauseAt + pauseFor + pauseAfter, Seed: seed}
	ll := validate.NewLeaseLog(h)
	hc := traffic.HTTPClient()
	deadline := time.Now().Add(w.Duration)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx, h, func(worker int) cluster.Target { return c.Target(worker) }) })
	for i := range leaseWorker {
		rc := traffic.NewClient(h, 10+i, c.Target(0), hc)
		lock := fmt.Sprintf("e2e/lease-%d", i%leaseLocks)
		rng := rand.New(rand.NewPCG(seed, uint64(10+i)))
		wg.Go(func() {
			leaseWorkerRun(ctx, ll, client.New(s.URL(), client.WithHTTPClient(hc)), rc, i, lock, rng, deadline)
		})
	}
	time.Sleep(pauseAt)
	t.Logf("e2e: server paused at %v for %v", time.Duration(h.Now()).Round(time.Millisecond), pauseFor)
	s.Pause()
	time.Sleep(pauseFor)
	s.Resume()
	wg.Wait()
	w.FinalReads(ctx, h, c.Target(0))
	rc := traffic.NewClient(h, 20, c.Target(0), hc)
	for l := range leaseLocks {
		for i := 0; !rc.Read(ctx, "final", fmt.Sprintf("e2e/lease-%d", l), "k0", true).Output.Known() && i < 100; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}

	r := validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	recs := ll.Records()
	saveLeases(t, recs)
	vs := validate.CheckLost(recs)
	lost, slack := 0, time.Duration(1<<62)
	for _, rec := range recs {
		if rec.Lost > 0 && (rec.Released == 0 || rec.Lost < rec.Released) {
			lost++
			slack = min(slack, time.Duration(time.Unix(rec.ExpiresAt, 0).UnixNano()-rec.LostWall))
			t.Logf("e2e: lost while held: %v", rec)
		}
	}
	t.Logf("e2e: %d leases through the Go client, %d lost while held (least time from Lost to expires_at: %v); %d violations of the Lost checks",
		len(recs), lost, slack.Round(time.Millisecond), len(vs))
	for _, v := range vs {
		t.Logf("e2e: %v", v)
	}
	r.Violations = append(r.Violations, vs...)
	return r, recs
}

// leaseWorkerRun takes lock through the Go client's Lease until deadline:
// an acquire that waits every other time (tried again 20 to 80 ms later
// when the lock is taken), across the pause too: a grant from the queue
// answered after the server was continued may already have lapsed, which
// Acquire must find out (a *GrantLostError), not hand over. Then work, writes under the token every 150 ms, for 0.5
// to 3 s (longer than the 2 s a Lease may go without a renew, so that the
// pause finds most holders at work) or until Lost is closed, then a
// release.
func leaseWorkerRun(ctx context.Context, ll *validate.LeaseLog, cl *client.Client, rc *traffic.Client, worker int, lock string, rng *rand.Rand, deadline time.Time) {
	id := fmt.Sprintf("lw%d/%s", worker, lock)
	n := 0
	for time.Now().Before(deadline) {
		var wait time.Duration
		if rng.IntN(2) == 0 {
			wait = 20 * time.Second
		}
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l, err := ll.Acquire(actx, cl, worker, lock, client.AcquireOptions{Client: id, TTL: pauseTTL, Wait: wait})
		cancel()
		if err != nil {
			var q *client.QueuedError
			if !errors.As(err, &q) {
				// An unknown outcome (Acquire withdrew the request) or a
				// refusal: try again, a little later.
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(time.Duration(20+rng.IntN(60)) * time.Millisecond)
			continue
		}
		work := time.NewTimer(time.Duration(500+rng.IntN(2500)) * time.Millisecond)
		tick := time.NewTicker(150 * time.Millisecond)
	working:
		for {
			select {
			case <-l.Lost():
				break working
			case <-work.C:
				break working
			case <-tick.C:
			}
			select {
			case <-l.Lost():
				break working
			default:
			}
			n++
			rc.Write(ctx, id, lock, "k0", fmt.Sprintf("lw%d-%d", worker, n), l.Token())
		}
		work.Stop()
		tick.Stop()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		l.Release(rctx)
		cancel()
	}
}

// saveLeases writes the leases' records to leases.jsonl in the test's
// artifact directory, beside history.jsonl.
func saveLeases(t *testing.T, recs []validate.LeaseRecord) {
	f, err := os.Create(filepath.Join(t.ArtifactDir(), "leases.jsonl"))
	if err != nil {
		t.Errorf("e2e: saving the leases: %v", err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, rec := range recs {
		enc.Encode(rec)
	}
}
