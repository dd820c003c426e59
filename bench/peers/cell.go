package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// namesPerClient is what "light contention" means here: a row of n clients
// has namesPerClient × n names, and each pair takes one of them at random,
// so that two clients now and then want the same name but mostly do not.
const namesPerClient = 4

// load is one row of the table: how many clients, and which names they take.
type load struct {
	clients int
	hot     bool // every client takes the one name
}

func (l load) names() []string {
	if l.hot {
		return []string{"hot"}
	}
	names := make([]string, namesPerClient*l.clients)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i)
	}
	return names
}

// String is the row's column heading.
func (l load) String() string {
	switch {
	case l.hot:
		return fmt.Sprintf("hot lock, %d", l.clients)
	case l.clients == 1:
		return "1 client"
	}
	return fmt.Sprintf("%d clients", l.clients)
}

// pairSpec is what every client of every system does in a pair.
type pairSpec struct {
	wait time.Duration // the longest a blocking acquire may take
	hold time.Duration // between the grant and the release; 0 in the table's measurement
	ttl  int           // leasekeeper's lease, in seconds (etcd's session keeps its default)
}

// pairTimes is what a client saw of one pair: the acquire sent, its grant
// read, the release about to be sent, the release's answer read.
type pairTimes struct {
	start, acquired, releasing, end time.Time
	token                           int64 // the grant's fencing token (etcd: the key's create revision)
}

// worker is one client of a system, with its own connection and identity.
// pair blocks until it holds name, then gives it back. A pair that failed
// after the grant still has acquired and releasing set: the hold is
// checked like any other.
type worker interface {
	pair(ctx context.Context, name string) (pairTimes, error)
	close()
}

// instance is a system started for one cell, on an empty store.
type instance interface {
	worker(i int) (worker, error)
	stop() error
}

// counted is an instance whose servers count their work (leasekeeper's
// /metrics): what the measured part of a cell cost them, beside its pairs.
type counted interface {
	counts(ctx context.Context) (engineCounts, error)
}

// engineCounts are leasekeeper's committer counters, summed over a fleet's
// servers: round trips to PostgreSQL (0 on SQLite), operations and groups;
// the seconds its group commits took, from the first statement to the
// commit's end, its sync or its round trips included
// (leasekeeper_commit_duration_seconds' sum); and the operations and
// groups of the histogram of operations per commit, which the build
// before issue 19 exports without the counters.
type engineCounts struct {
	roundTrips, operations, groups, commitSeconds float64
	histOperations, histGroups                    float64
}

func (c engineCounts) minus(o engineCounts) engineCounts {
	return engineCounts{c.roundTrips - o.roundTrips, c.operations - o.operations, c.groups - o.groups,
		c.commitSeconds - o.commitSeconds, c.histOperations - o.histOperations, c.histGroups - o.histGroups}
}

// ops and grps are the operations and groups counted, from the histogram
// where the counters are missing.
func (c engineCounts) ops() float64 {
	if c.operations > 0 {
		return c.operations
	}
	return c.histOperations
}

func (c engineCounts) grps() float64 {
	if c.groups > 0 {
		return c.groups
	}
	return c.histGroups
}

// cpuTimed is an instance that knows the CPU time its server processes
// have used so far: etcd's, or leasekeeper's servers' and the database's
// they share.
type cpuTimed interface {
	serverCPU() (time.Duration, bool)
}

// cellResult is one system's measurement of one row in one round.
type cellResult struct {
	pairs      int // completed in the measured part
	elapsed    time.Duration
	lat        []time.Duration // one per completed pair, sorted
	errors     int
	samples    []string // the first few errors
	holds      int      // checked, warm-up included
	violations []string
	load1      float64 // the machine's load average when the cell started
	// busy and stolen are the shares of the machine's CPU time, in the
	// measured part, spent running anything and given by the hypervisor
	// to other machines (shares); -1 when unknown.
	busy, stolen float64
	counts       *engineCounts // the servers' work in the measured part; nil where not counted
	// serverCPU is the CPU time, user and system, the system's server
	// processes used in the measured part; -1 when unknown.
	serverCPU time.Duration
}

func (r *cellResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.pairs) / r.elapsed.Seconds()
}

// opsPerGroup and roundTripsPerOp are -1 for a cell not counted, or
// counted by a build without the counters.
func (r *cellResult) opsPerGroup() float64 {
	if r.counts == nil || r.counts.grps() <= 0 {
		return -1
	}
	return r.counts.ops() / r.counts.grps()
}

// cpuPerPair is the servers' CPU time per pair of the measured part, in
// µs; committerPerOp the committer's time per operation, in µs, from
// leasekeeper's /metrics. Both are -1 where unknown.
func (r *cellResult) cpuPerPair() float64 {
	if r.serverCPU < 0 || r.pairs <= 0 {
		return -1
	}
	return float64(r.serverCPU) / float64(time.Microsecond) / float64(r.pairs)
}

func (r *cellResult) committerPerOp() float64 {
	if r.counts == nil || r.counts.ops() <= 0 || r.counts.commitSeconds <= 0 {
		return -1
	}
	return r.counts.commitSeconds * 1e6 / r.counts.ops()
}

func (r *cellResult) roundTripsPerOp() float64 {
	if r.counts == nil || r.counts.operations <= 0 {
		return -1
	}
	return r.counts.roundTrips / r.counts.operations
}

// percentile is the nearest-rank percentile of the pairs' latencies, or -1
// without any.
func (r *cellResult) percentile(p float64) time.Duration {
	return nearestRank(r.lat, p)
}

func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return -1
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// runCell drives inst with l's clients: an unmeasured warm-up, then the
// measured run, on the same connections. Each client loops pairs on a name
// drawn at random from the row's names until the time is up; a pair started
// before then runs to its end, and is counted, as is the time it takes.
// Every hold of the cell goes to the safety check.
func runCell(ctx context.Context, inst instance, l load, warmup, duration time.Duration, seed uint64) (*cellResult, error) {
	res := &cellResult{load1: loadAverage()[0], serverCPU: -1}
	workers := make([]worker, 0, l.clients)
	defer func() {
		for _, w := range workers {
			w.close()
		}
	}()
	for i := range l.clients {
		w, err := inst.worker(i)
		if err != nil {
			return nil, fmt.Errorf("client %d: %w", i, err)
		}
		workers = append(workers, w)
	}
	names := l.names()
	rngs := make([]*rand.Rand, len(workers))
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(seed, uint64(i)))
	}
	var holds []hold
	var mu sync.Mutex
	phase := func(d time.Duration, measured bool) {
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(d)
		for i, w := range workers {
			wg.Go(func() {
				var lat []time.Duration
				var mine []hold
				var errs int
				var samples []string
				for ctx.Err() == nil && time.Now().Before(deadline) {
					name := names[rngs[i].IntN(len(names))]
					p, err := w.pair(ctx, name)
					if !p.acquired.IsZero() {
						mine = append(mine, hold{name: name, client: i, from: p.acquired, to: p.releasing, token: p.token})
					}
					if err != nil {
						if ctx.Err() != nil {
							break
						}
						errs++
						if len(samples) < 3 {
							samples = append(samples, err.Error())
						}
						time.Sleep(10 * time.Millisecond)
						continue
					}
					lat = append(lat, p.end.Sub(p.start))
				}
				mu.Lock()
				defer mu.Unlock()
				holds = append(holds, mine...)
				res.errors += errs
				res.samples = append(res.samples, samples...)
				if measured {
					res.lat = append(res.lat, lat...)
				}
			})
		}
		wg.Wait()
		if measured {
			res.elapsed = time.Since(start)
		}
	}
	if warmup > 0 {
		phase(warmup, false)
	}
	// The counters are read between the phases and after the last, when no
	// pair is under way: every operation counted is one of the measured
	// pairs'. A server that cannot tell leaves the cell uncounted.
	var before engineCounts
	c, countable := inst.(counted)
	if countable {
		var err error
		if before, err = c.counts(ctx); err != nil {
			countable = false
		}
	}
	timed, cpuTimed := inst.(cpuTimed)
	var serverBefore time.Duration
	if cpuTimed {
		serverBefore, cpuTimed = timed.serverCPU()
	}
	cpuBefore := readCPU()
	phase(duration, true)
	res.busy, res.stolen = shares(cpuBefore, readCPU())
	if cpuTimed {
		if after, ok := timed.serverCPU(); ok && after >= serverBefore {
			res.serverCPU = after - serverBefore
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if countable {
		if after, err := c.counts(ctx); err == nil {
			d := after.minus(before)
			res.counts = &d
		}
	}
	slices.Sort(res.lat)
	res.pairs = len(res.lat)
	res.samples = res.samples[:min(len(res.samples), 5)]
	res.holds = len(holds)
	res.violations = check(holds)
	return res, nil
}
