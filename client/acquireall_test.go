package client_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
)

// The 20-job test of AcquireAll: each job takes a random set of 3 of 6
// locks, some shared, holds it longer than its ttl (so that the leases
// live by their renewals), and releases it. With AcquireAll's canonical
// order no job is ever a deadlock victim, and all finish. The negative
// control runs the same jobs taking their locks one by one, each set in a
// random order: there the service must break deadlocks, and some jobs are
// victims.

const (
	jobsN    = 20
	jobTTL   = 4 * time.Second
	jobHold  = jobTTL + 200*time.Millisecond
	jobsWait = 3 * time.Minute
)

type jobSpec struct {
	client string
	locks  []client.LockSpec // in the job's own (random) order
}

func randomJobs(seed uint64) []jobSpec {
	r := rand.New(rand.NewPCG(seed, seed))
	names := []string{"L0", "L1", "L2", "L3", "L4", "L5"}
	jobs := make([]jobSpec, jobsN)
	for i := range jobs {
		perm := r.Perm(len(names))[:3]
		var locks []client.LockSpec
		for _, p := range perm {
			locks = append(locks, client.LockSpec{Lock: names[p], Shared: r.IntN(3) == 0})
		}
		jobs[i] = jobSpec{client: fmt.Sprintf("job-%02d", i), locks: locks}
	}
	return jobs
}

// holders checks S1 while the jobs hold their sets: a lock is held by one
// exclusive holder or by shared ones only.
type holders struct {
	mu        sync.Mutex
	exclusive map[string]int
	shared    map[string]int
	violation string
}

func (h *holders) enter(locks []client.LockSpec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range locks {
		if l.Shared {
			h.shared[l.Lock]++
		} else {
			h.exclusive[l.Lock]++
		}
		if h.exclusive[l.Lock] > 1 || (h.exclusive[l.Lock] == 1 && h.shared[l.Lock] > 0) {
			h.violation = fmt.Sprintf("%s held by %d exclusive and %d shared holders", l.Lock, h.exclusive[l.Lock], h.shared[l.Lock])
		}
	}
}

func (h *holders) leave(locks []client.LockSpec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range locks {
		if l.Shared {
			h.shared[l.Lock]--
		} else {
			h.exclusive[l.Lock]--
		}
	}
}

type jobResult struct {
	err     error    // the job did not get or keep its locks
	victims []string // clients its acquires aborted
}

// runJobs runs every job at once; take acquires a job's set and returns
// its leases (in any order), what its acquires aborted, and the set's Lost.
func runJobs(t *testing.T, jobs []jobSpec, take func(ctx context.Context, j jobSpec) (release func(), lost <-chan struct{}, victims []string, err error)) []jobResult {
	t.Helper()
	h := &holders{exclusive: map[string]int{}, shared: map[string]int{}}
	results := make([]jobResult, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), jobsWait+time.Minute)
			defer cancel()
			release, lost, victims, err := take(ctx, j)
			results[i].victims = victims
			if err != nil {
				results[i].err = err
				return
			}
			h.enter(j.locks)
			select {
			case <-time.After(jobHold):
			case <-lost:
				results[i].err = errors.New("a lease was lost while the job held its set")
			}
			h.leave(j.locks)
			release()
		})
	}
	wg.Wait()
	if h.violation != "" {
		t.Errorf("S1 broken: %s", h.violation)
	}
	return results
}

func TestAcquireAllTwentyJobs(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	jobs := randomJobs(21)
	start := time.Now()
	results := runJobs(t, jobs, func(ctx context.Context, j jobSpec) (func(), <-chan struct{}, []string, error) {
		set, err := s.AcquireAll(ctx, j.locks, client.AcquireOptions{Client: j.client, TTL: jobTTL, Wait: jobsWait})
		if err != nil {
			return nil, nil, nil, err
		}
		var victims []string
		for _, l := range set.Leases() {
			victims = append(victims, l.Victims()...)
		}
		// The set is in canonical order, whatever the job's.
		got := set.Leases()
		if !slices.IsSortedFunc(got, func(a, b *client.Lease) int { return compare(a.Lock(), b.Lock()) }) {
			t.Errorf("%s: the set is not in canonical order", j.client)
		}
		return func() {
			if err := set.Release(context.Background()); err != nil {
				t.Errorf("%s: release: %v", j.client, err)
			}
		}, set.Lost(), victims, nil
	})
	for i, r := range results {
		if r.err != nil {
			t.Errorf("%s (%v): %v", jobs[i].client, jobs[i].locks, r.err)
		}
		if len(r.victims) > 0 {
			t.Errorf("%s aborted %v as deadlock victims", jobs[i].client, r.victims)
		}
	}
	if !t.Failed() {
		t.Logf("%d jobs, each holding 3 of 6 locks for %v with a ttl of %v: all finished in %v, no victim",
			len(jobs), jobHold, jobTTL, time.Since(start).Round(time.Millisecond))
	}
}

// TestOneByOneDeadlocks is the negative control: the same jobs, each taking
// its locks one by one in its own random order, make the service break
// deadlocks.
func TestOneByOneDeadlocks(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	jobs := randomJobs(21)
	results := runJobs(t, jobs, func(ctx context.Context, j jobSpec) (func(), <-chan struct{}, []string, error) {
		var leases []*client.Lease
		var victims []string
		releaseAll := func() {
			for _, l := range slices.Backward(leases) {
				l.Release(context.Background())
			}
		}
		deadline := time.Now().Add(jobsWait)
		lost := make(chan struct{})
		for _, spec := range j.locks {
			l, err := s.Acquire(ctx, spec.Lock, client.AcquireOptions{Client: j.client, TTL: jobTTL, Shared: spec.Shared,
				Wait: time.Until(deadline).Truncate(time.Second)})
			if err != nil {
				releaseAll()
				return nil, nil, victims, err
			}
			victims = append(victims, l.Victims()...)
			leases = append(leases, l)
			go func() {
				<-l.Lost()
				select {
				case <-lost:
				default:
					close(lost)
				}
			}()
			// A moment between locks, as a job that does some work on
			// each: the window in which another job takes the next one.
			time.Sleep(100 * time.Millisecond)
		}
		return releaseAll, lost, victims, nil
	})
	aborted := 0
	var all []string
	for i, r := range results {
		switch {
		case errors.Is(r.err, client.ErrDeadlock):
			aborted++
		case r.err != nil && !errors.Is(r.err, client.ErrNotHolder) && r.err.Error() != "a lease was lost while the job held its set":
			t.Errorf("%s: %v", jobs[i].client, r.err)
		}
		all = append(all, r.victims...)
	}
	if aborted == 0 && len(all) == 0 {
		t.Fatalf("no job was a deadlock victim: the control shows nothing")
	}
	t.Logf("one by one in random orders: %d jobs told they were aborted; the acquires named %d victims: %v", aborted, len(all), all)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestAcquireAllFailures: a failure part-way releases what was taken and
// names the lock that failed; the set's Lost closes when one lease is
// lost; bad sets are refused before anything is sent.
func TestAcquireAllFailures(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	ctx := ctxT(t)
	y, err := s.Acquire(ctx, "b", client.AcquireOptions{Client: "y", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The wait runs out on b; a, taken first, is released.
	_, err = s.AcquireAll(ctx, []client.LockSpec{{Lock: "b"}, {Lock: "a"}}, client.AcquireOptions{Client: "j", TTL: 5 * time.Second, Wait: time.Second})
	var part *client.AcquireAllError
	if !errors.As(err, &part) || part.Lock != "b" || part.Lost || !errors.Is(err, client.ErrQueued) {
		t.Fatalf("got %v; want b still queued", err)
	}
	if st, err := s.Status(ctx, "j"); err != nil || len(st.Holds) != 0 || st.Waiting != nil {
		t.Errorf("j after the failure: %+v, %v; want nothing held or awaited", st, err)
	}

	// Complete, then one lease is lost: the set's Lost closes, naming it.
	y.Release(ctx)
	set, err := s.AcquireAll(ctx, []client.LockSpec{{Lock: "b"}, {Lock: "a", Shared: true}}, client.AcquireOptions{Client: "j", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Leases(); len(got) != 2 || got[0].Lock() != "a" || got[1].Lock() != "b" || set.Lease("b") != got[1] {
		t.Fatalf("set: %v", got)
	}
	if _, err := s.Release(ctx, "j", "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-set.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("the set's Lost did not close after b was released from elsewhere")
	}
	if !errors.As(set.Err(), &part) || part.Lock != "b" || !part.Lost || !errors.Is(set.Err(), client.ErrNotHolder) {
		t.Errorf("set.Err() = %v; want b lost, not holder", set.Err())
	}
	set.Release(ctx)

	for _, bad := range [][]client.LockSpec{nil, {{Lock: "a"}, {Lock: "a", Shared: true}}, {{Lock: ""}}} {
		if _, err := s.AcquireAll(ctx, bad, client.AcquireOptions{Client: "k", TTL: 5 * time.Second}); err == nil || errors.As(err, &part) {
			t.Errorf("AcquireAll(%v) = %v; want a refusal before anything was sent", bad, err)
		}
	}
	if _, err := s.AcquireAll(ctx, []client.LockSpec{{Lock: "a"}}, client.AcquireOptions{Client: "k", TTL: 5 * time.Second, Shared: true}); err == nil {
		t.Error("AcquireOptions.Shared was accepted")
	}
	if st, err := s.Status(ctx, "k"); err != nil || st.Age != 0 {
		t.Errorf("k after refused sets: %+v, %v; want never registered", st, err)
	}
}
