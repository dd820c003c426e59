package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// soakEnv holds the soak's length (LEASEKEEPER_SOAK=30m); without it
// TestSoak is skipped.
const soakEnv = "LEASEKEEPER_SOAK"

// soakRound is the length of a round's workload: long enough for faults to
// strike in the middle of one, short enough that porcupine checks each in
// seconds.
const soakRound = 25 * time.Second

// soakFault is a fault the soak strikes at random. run does it to the
// cluster and undoes it before it returns (a killed server is started
// again, a paused one resumed), so that the next fault finds every server
// up. A fault that needs something of the cluster says so, and the beds
// that have it set the Option.
type soakFault struct {
	name string
	// postgres: only on the bed whose servers run on PostgreSQL, each
	// through a proxy (Options.ProxyPostgres).
	postgres bool
	// sqlite: only on the bed whose server runs on a SQLite file.
	sqlite bool
	run    func(c *cluster.Cluster, rng *rand.Rand)
}

// soakFaults are the faults of the soak; add one here to have it struck.
var soakFaults = []soakFault{
	{name: "kill", run: func(c *cluster.Cluster, rng *rand.Rand) {
		// kill -9, down for up to a second (operations meanwhile are
		// refused), started again on the same database.
		s := c.Servers[rng.IntN(len(c.Servers))]
		s.Kill()
		time.Sleep(time.Duration(rng.Int64N(int64(time.Second))))
		s.Start()
	}},
	{name: "pause", run: func(c *cluster.Cluster, rng *rand.Rand) {
		// SIGSTOP then SIGCONT: mostly short; one in five past the
		// clients' 10 s timeout, so that what was sent meanwhile is of
		// unknown outcome and may still happen after the resume. Never
		// past a lease's ttl (300 s): a lapse is a move the history does
		// not show, which porcupine cannot place (docs/robustness.md,
		// Time).
		s := c.Servers[rng.IntN(len(c.Servers))]
		d := 100*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
		if rng.IntN(5) == 0 {
			d = 11*time.Second + time.Duration(rng.Int64N(int64(3*time.Second)))
		}
		s.Pause()
		time.Sleep(d)
		s.Resume()
	}},
	{name: "restart", run: func(c *cluster.Cluster, rng *rand.Rand) {
		// A graceful restart: SIGTERM, drain, start.
		s := c.Servers[rng.IntN(len(c.Servers))]
		s.Stop()
		s.Start()
	}},
	{name: "cut-db", postgres: true, run: func(c *cluster.Cluster, rng *rand.Rand) {
		// A server's connections to PostgreSQL broken, and refused for
		// up to 3 s (Options.ProxyPostgres).
		p := c.Servers[rng.IntN(len(c.Servers))].Proxy()
		p.Cut()
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(3*time.Second))))
		p.Restore()
	}},
	{name: "delay-db", postgres: true, run: func(c *cluster.Cluster, rng *rand.Rand) {
		// Every byte between a server and PostgreSQL held 20 to 300 ms,
		// for 1 to 4 s.
		p := c.Servers[rng.IntN(len(c.Servers))].Proxy()
		p.Delay(20*time.Millisecond + time.Duration(rng.Int64N(int64(280*time.Millisecond))))
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		p.Delay(0)
	}},
	{name: "disk-full", sqlite: true, run: func(c *cluster.Cluster, rng *rand.Rand) {
		// The files may not grow past the database's size for 1 to 4 s
		// (RLIMIT_FSIZE, as in TestDiskFull): commits fail, answered 503.
		s := c.Servers[0]
		s.LimitFileSize(fileSize(c.DB()) + 4096)
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		s.LimitFileSize(-1)
	}},
}

// soakBed is a cluster the soak runs on.
type soakBed struct {
	name     string
	postgres bool
	opts     cluster.Options
}

// TestSoak runs the workload for LEASEKEEPER_SOAK (a duration: 60s, 30m)
// on a SQLite server and, at the same time, on two servers sharing a
// PostgreSQL schema, each through a proxy, when LEASEKEEPER_TEST_POSTGRES
// names a server (not "skip"), while faults drawn at random
// from soakFaults strike every few seconds. The run is checked in windows:
// rounds of 25 s, each on locks of its own, so each is a history of its
// own that porcupine checks while the next runs. A fault strikes whenever
// it is due, in the middle of a round or between two. It ends with one
// line of summary (and soak.json in the artifact directory), and fails on
// any violation. Only a round with a violation keeps its history.
func TestSoak(t *testing.T) {
	v := os.Getenv(soakEnv)
	if v == "" {
		t.Skipf("%s is not set: no soak (LEASEKEEPER_SOAK=30m runs one)", soakEnv)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 60s or 30m", soakEnv, v)
	}
	// The rounds, the last one's check and the cleanup take a minute or
	// two past d.
	if deadline, ok := t.Deadline(); ok && time.Until(deadline) < d+3*time.Minute {
		t.Fatalf("%s=%v needs go test -timeout of at least %v", soakEnv, d, (d + 3*time.Minute).Round(time.Minute))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	beds := []soakBed{{name: "sqlite"}}
	if pg := os.Getenv(pgtest.EnvVar); pg != "" && pg != "skip" {
		beds = append(beds, soakBed{name: "postgres", postgres: true,
			opts: cluster.Options{Postgres: true, Servers: 2, ProxyPostgres: true}})
	}
	start := time.Now()
	results := make([]*soakResult, len(beds))
	var wg sync.WaitGroup
	for i, b := range beds {
		results[i] = &soakResult{Bed: b.name, Faults: map[string]int{}}
		wg.Go(func() { soak(t, b, seed+uint64(i)<<32, d, results[i]) })
	}
	wg.Wait()
	sum := summarize(d, time.Since(start), seed, results)
	if err := sum.save(filepath.Join(t.ArtifactDir(), "soak.json")); err != nil {
		t.Errorf("soak.json: %v", err)
	}
	t.Log(sum.line())
	if sum.Violations > 0 {
		t.Errorf("%d of %d rounds had violations (above)", sum.Violations, sum.Rounds)
	}
}

// soakResult is what one bed's soak found.
type soakResult struct {
	Bed    string         `json:"bed"`
	Rounds []roundResult  `json:"rounds"`
	Faults map[string]int `json:"faults"` // by soakFault.name
	mu     sync.Mutex
}

type roundResult struct {
	Round        int      `json:"round"`
	Seconds      float64  `json:"seconds"` // the workload's
	Ops          int      `json:"ops"`
	Unknown      int      `json:"unknown"`
	Faults       int      `json:"faults"` // in the history: kills, starts, pauses, ...
	Violations   []string `json:"violations,omitempty"`
	Linearizable string   `json:"linearizable"`
	CheckSeconds float64  `json:"check_seconds"`
	// The slowest answered operation but blocking acquires (the server
	// holds those for their wait by design).
	SlowestSeconds float64 `json:"slowest_seconds"`
	SlowestKind    string  `json:"slowest_kind"`
}

// soak runs rounds on bed for d, with faults, into res.
func soak(t *testing.T, bed soakBed, seed uint64, d time.Duration, res *soakResult) {
	rng := rand.New(rand.NewPCG(seed, 0))
	h := history.New()
	opts := bed.opts
	opts.History = h
	opts.Dir = filepath.Join(t.ArtifactDir(), bed.name)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := cluster.Start(t, opts)
	var faults []soakFault
	for _, f := range soakFaults {
		if (!f.postgres || bed.postgres) && (!f.sqlite || !bed.postgres) {
			faults = append(faults, f)
		}
	}

	// The faults, every 1 to 6 s, until stop. faultMu is held through a
	// fault, so that a round's history is switched between two faults,
	// never in the middle of one.
	var faultMu sync.Mutex
	var lastFaultEnd time.Time // guarded by faultMu
	stop := make(chan struct{})
	var faulting sync.WaitGroup
	faulting.Go(func() {
		frng := rand.New(rand.NewPCG(seed, 1))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second + time.Duration(frng.Int64N(int64(5*time.Second)))):
			}
			f := faults[frng.IntN(len(faults))]
			func() {
				faultMu.Lock()
				defer faultMu.Unlock()
				f.run(c, frng)
				lastFaultEnd = time.Now()
			}()
			res.mu.Lock()
			res.Faults[f.name]++
			res.mu.Unlock()
		}
	})

	var checking sync.WaitGroup
	end := time.Now().Add(d)
	for n := 1; !t.Failed(); n++ {
		left := time.Until(end)
		if left < time.Second || (n > 1 && left < 5*time.Second) {
			break
		}
		if n > 1 {
			h = history.New()
			faultMu.Lock()
			c.SetHistory(h)
			settled := lastFaultEnd.Add(validate.RecoverBy)
			faultMu.Unlock()
			// A fault undone just before the switch still slows the
			// round's first seconds (a server resumed or restarted
			// catching up, a connection to PostgreSQL made again), and
			// the new history does not show it: the checks, which allow
			// for RecoverBy after a fault they see, would take its
			// after-effects for the server's. The round starts once
			// those have passed; a fault meanwhile is the new round's.
			time.Sleep(time.Until(settled))
		}
		w := traffic.Workload{Duration: min(soakRound, left), Seed: rng.Uint64(), Prefix: fmt.Sprintf("soak-%d/", n)}
		if bed.postgres {
			// Two servers and faults that answer 503 leave many
			// operations of unknown outcome at once; spread over 4
			// locks, a round's partition once took porcupine past its
			// minute (round 17 of a 30-minute soak: 898 operations on
			// one lock, 15 unknown). Over 10 locks each partition has
			// fewer operations in flight at a time, as in
			// two-servers-postgres.
			w.Locks = pgLocks
		}
		began := time.Now()
		w.Run(context.Background(), h, func(worker int) cluster.Target { return c.Target(worker) })
		took := time.Since(began)
		w.FinalReads(context.Background(), h, c.Target(0))
		round := h // h is the next round's by the time the check runs
		checking.Go(func() { res.add(t, bed.name, n, took, round) })
	}
	close(stop)
	faulting.Wait()
	checking.Wait()
}

// soakCheckTimeout bounds porcupine's search of a round: longer than a
// scenario's, as a round is checked while the next runs, so a slow search
// delays nothing; still an unknown verdict is a failure.
const soakCheckTimeout = 3 * time.Minute

// add checks round n's history and adds its verdict to res. Only a round
// with a violation keeps its history, in <bed>/round-<n>.
func (res *soakResult) add(t *testing.T, bed string, n int, took time.Duration, h *history.History) {
	dir := filepath.Join(t.ArtifactDir(), bed, fmt.Sprintf("round-%d", n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	r := validate.Verify(roundTB{t, dir}, h, soakCheckTimeout)
	rr := roundResult{Round: n, Seconds: took.Seconds(), Ops: r.Ops, Unknown: r.Unknown, Faults: r.Faults,
		Linearizable: string(r.Linearizable), CheckSeconds: r.CheckTime.Seconds()}
	if r.Outcomes["acquire granted"] == 0 {
		// A round that did nothing would pass every check.
		r.Violations = append(r.Violations, validate.Violation{Check: "soak", Message: "no acquire granted in the round"})
	}
	for _, v := range r.Violations {
		rr.Violations = append(rr.Violations, v.String())
		t.Errorf("%s, round %d: %v", bed, n, v)
	}
	for _, op := range h.Ops() {
		if !op.Output.Known() || (op.Input.Kind == history.Acquire && op.Input.Wait > 0) {
			continue
		}
		if s := time.Duration(op.Return - op.Call).Seconds(); s > rr.SlowestSeconds {
			rr.SlowestSeconds, rr.SlowestKind = s, string(op.Input.Kind)
		}
	}
	if r.OK() {
		os.RemoveAll(dir)
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	res.Rounds = append(res.Rounds, rr)
}

// roundTB is the test with an artifact directory of the round's own, for
// Verify.
type roundTB struct {
	testing.TB
	dir string
}

func (r roundTB) ArtifactDir() string { return r.dir }

// soakSummary is the soak's verdict, soak.json.
type soakSummary struct {
	Duration   string         `json:"duration"`
	Elapsed    float64        `json:"elapsed_seconds"`
	Seed       uint64         `json:"seed"`
	Rounds     int            `json:"rounds"`
	Ops        int            `json:"ops"`
	Unknown    int            `json:"unknown"`
	Faults     map[string]int `json:"faults"`
	Clean      int            `json:"clean"`
	Violations int            `json:"violations"` // rounds with any
	Slowest    struct {
		Seconds float64 `json:"seconds"`
		Kind    string  `json:"kind"`
		Bed     string  `json:"bed"`
		Round   int     `json:"round"`
	} `json:"slowest"`
	Beds []*soakResult `json:"beds"`
}

func summarize(d, elapsed time.Duration, seed uint64, results []*soakResult) soakSummary {
	s := soakSummary{Duration: d.String(), Elapsed: elapsed.Seconds(), Seed: seed, Faults: map[string]int{}, Beds: results}
	for _, res := range results {
		slices.SortFunc(res.Rounds, func(a, b roundResult) int { return a.Round - b.Round })
		for k, n := range res.Faults {
			s.Faults[k] += n
		}
		for _, r := range res.Rounds {
			s.Rounds++
			s.Ops += r.Ops
			s.Unknown += r.Unknown
			if len(r.Violations) > 0 {
				s.Violations++
			} else {
				s.Clean++
			}
			if r.SlowestSeconds > s.Slowest.Seconds {
				s.Slowest.Seconds, s.Slowest.Kind, s.Slowest.Bed, s.Slowest.Round = r.SlowestSeconds, r.SlowestKind, res.Bed, r.Round
			}
		}
	}
	return s
}

// line is the summary in one line:
//
//	soak: 30m0s, 12 rounds, 412,331 operations (57 unknown), 41 faults (kill 20, pause 14, restart 7), verdicts: 12 clean / 0 violations, slowest answer 1.84s (acquire, sqlite round 7)
func (s soakSummary) line() string {
	var total int
	var kinds []string
	for _, f := range soakFaults {
		if n, ok := s.Faults[f.name]; ok {
			total += n
			kinds = append(kinds, fmt.Sprintf("%s %d", f.name, n))
		}
	}
	// A soak stops at the first round with violations: say so, and how
	// long it ran, rather than the duration asked for.
	ran := s.Duration
	if el := time.Duration(s.Elapsed * float64(time.Second)); s.Violations > 0 && el < s.asked() {
		ran = fmt.Sprintf("%s asked, stopped after %s", s.Duration, el.Round(time.Second))
	}
	return fmt.Sprintf("soak: %s, %d rounds, %s operations (%s unknown), %d faults (%s), verdicts: %d clean / %d violations, slowest answer %.2fs (%s, %s round %d)",
		ran, s.Rounds, thousands(s.Ops), thousands(s.Unknown), total, strings.Join(kinds, ", "),
		s.Clean, s.Violations, s.Slowest.Seconds, s.Slowest.Kind, s.Slowest.Bed, s.Slowest.Round)
}

func (s soakSummary) asked() time.Duration {
	d, _ := time.ParseDuration(s.Duration)
	return d
}

func (s soakSummary) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
