package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// The INC-5127 scenario (docs/contract.md, section 7): a job holding a lock
// is stopped (SIGSTOP) past its ttl, a successor takes the lock and writes
// to the fenced store, and the job runs again (SIGCONT) and, as the
// incident's job did, goes on writing. The job is this test binary run
// again as TestHelperJob, in a process of its own that can be stopped: a
// real client, with the Go client's Lease and its keep-alive, stopped whole.

// jobEnv holds the job's jobConfig, as JSON; TestHelperJob skips without it.
const jobEnv = "LEASEKEEPER_E2E_JOB"

// jobWorker is the job's worker number in the history.
const jobWorker = 100

type jobConfig struct {
	URL    string `json:"url"`
	Lock   string `json:"lock"`
	Client string `json:"client"`
	Key    string `json:"key"`
	TTL    int64  `json:"ttl"` // seconds
	// After is how many writes the job makes once it saw Lost closed.
	After int `json:"after"`
}

// jobLine is a line of the job's standard output. At and the times of Op
// are Unix nanoseconds, the wall clock being the one thing two processes
// share.
type jobLine struct {
	Type      string      `json:"type"` // granted, write, lost, released, error
	At        int64       `json:"at"`
	Token     int64       `json:"token,omitempty"`
	GrantedAt int64       `json:"granted_at,omitempty"`
	ExpiresAt int64       `json:"expires_at,omitempty"`
	Op        *history.Op `json:"op,omitempty"`
	Err       string      `json:"err,omitempty"`
}

// TestHelperJob is the stalled job of the pause-client scenario, not a test
// of its own: it acquires the lock with the Go client, then writes to the
// fenced store under its token every 100 ms, without looking at Lost (the
// incident's job did not), printing each answer as a JSON line; once its
// Lease reports Lost (printed too) it makes a few more writes, releases
// and ends.
func TestHelperJob(t *testing.T) {
	raw := os.Getenv(jobEnv)
	if raw == "" {
		t.Skip("the stalled job of TestPauseClient, which runs it in a process of its own")
	}
	var cfg jobConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("%s: %v", jobEnv, err)
	}
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(l jobLine) {
		l.At = time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(l)
	}
	ctx := context.Background()
	cl := client.New(cfg.URL)
	lease, err := cl.Acquire(ctx, cfg.Lock, client.AcquireOptions{Client: cfg.Client, TTL: time.Duration(cfg.TTL) * time.Second})
	if err != nil {
		emit(jobLine{Type: "error", Err: err.Error()})
		t.Fatal(err)
	}
	emit(jobLine{Type: "granted", Token: lease.Token(), GrantedAt: lease.GrantedAt().Unix(), ExpiresAt: lease.ExpiresAt().Unix()})
	lost := make(chan struct{})
	go func() {
		<-lease.Lost()
		emit(jobLine{Type: "lost", Err: lease.Err().Error()})
		close(lost)
	}()
	jh := history.New()
	rc := traffic.NewClient(jh, jobWorker, func() cluster.Endpoint { return cluster.Endpoint{URL: cfg.URL} }, nil)
	rc.Timeout = 5 * time.Second
	wall := jh.Start().UnixNano()
	until := time.Now().Add(time.Minute)
	for i, after := 1, 0; after < cfg.After && time.Now().Before(until); i++ {
		select {
		case <-lost:
			after++
		default:
		}
		op := rc.Write(ctx, cfg.Client, cfg.Lock, cfg.Key, fmt.Sprintf("a:part %d", i), lease.Token())
		op.Call += wall
		op.Return += wall
		emit(jobLine{Type: "write", Op: &op})
		time.Sleep(100 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l := jobLine{Type: "released"}
	if err := lease.Release(rctx); err != nil {
		l.Err = err.Error()
	}
	emit(l)
}

var _ = register(scenario{
	name:    "pause-client",
	run:     pauseClient,
	catches: []string{failpoint.AcceptStaleWrite},
})

// TestPauseClient is incident INC-5127 replayed on a real server: etl-a,
// a job in a process of its own holding exports/daily with a ttl of 3 s,
// is stopped with SIGSTOP; etl-b's blocking acquire is granted when etl-a's
// lease lapses, and etl-b writes; then etl-a is continued with SIGCONT and
// writes on under its old token. Every write of etl-a sent after etl-b's
// first acknowledged write must be refused as stale, the store must keep
// etl-b's value, and etl-a's Lease must report Lost (stalled-fenced),
// besides Verify's checks of the store's writes and reads.
func TestPauseClient(t *testing.T) {
	runClean(t, "pause-client")
}

func pauseClient(t *testing.T, failpoints []string) validate.Result {
	const (
		lock, key = "exports/daily", "part-1"
		ttl       = 3 // seconds: the job's lease
	)
	h := history.New()
	c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints})
	s := c.Servers[0]
	cfg, _ := json.Marshal(jobConfig{URL: s.URL(), Lock: lock, Client: "etl-a", Key: key, TTL: ttl, After: 5})
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperJob$")
	cmd.Env = append(os.Environ(), jobEnv+"="+string(cfg))
	job := cluster.StartJob(t, h, "etl-a", cmd)

	// The job's lines, read on: the job's operations join the history
	// (on its clock: wall-clock nanoseconds less the history's start).
	var (
		granted jobLine
		lostErr string
		acked   int
	)
	start := h.Start().UnixNano()
	read := func(l jobLine) {
		switch l.Type {
		case "granted":
			granted = l
		case "write":
			op := *l.Op
			op.Call -= start
			op.Return -= start
			op.Worker, op.Server, op.Incarnation = jobWorker, s.Index(), s.Endpoint().Incarnation
			if op.Output.Known() && op.Output.Outcome == lk.OK {
				acked++
			}
			h.Record(op)
		case "lost":
			lostErr = l.Err
		case "error":
			t.Errorf("job: %s", l.Err)
		}
		t.Logf("job: %s at %s", line(l), time.Duration(l.At-start).Round(time.Millisecond))
	}
	next := func(timeout time.Duration) bool {
		select {
		case b, ok := <-job.Lines():
			if !ok {
				return false
			}
			var l jobLine
			if !bytes.HasPrefix(b, []byte("{")) || json.Unmarshal(b, &l) != nil {
				t.Logf("job says: %s", b)
				return true
			}
			read(l)
			return true
		case <-time.After(timeout):
			t.Fatalf("job: no line within %v", timeout)
			return false
		}
	}
	for acked < 2 && next(30*time.Second) {
	}
	if acked < 2 {
		t.Fatalf("the job ended before two of its writes were acknowledged:\n%s", job.Stderr())
	}
	job.Pause()

	// etl-b waits for the lock, which the server hands over when etl-a's
	// lease lapses, then writes once under its token: etl-a's writes must
	// be refused from then on.
	ctx := context.Background()
	rc := traffic.NewClient(h, 1, c.Target(0), traffic.HTTPClient())
	succ, err := client.New(s.URL()).Acquire(ctx, lock, client.AcquireOptions{Client: "etl-b", TTL: 10 * time.Second, Wait: 4 * ttl * time.Second})
	if err != nil {
		t.Fatalf("etl-b's acquire while etl-a is stopped: %v", err)
	}
	t.Logf("etl-b granted token %d at %d (etl-a's token %d granted [%d, %d), renewed since maybe) at %s",
		succ.Token(), succ.GrantedAt().Unix(), granted.Token, granted.GrantedAt, granted.ExpiresAt, time.Duration(h.Now()).Round(time.Millisecond))
	if w := rc.Write(ctx, "etl-b", lock, key, "b:part 1", succ.Token()); w.Output.Outcome != lk.OK {
		t.Errorf("etl-b's write: %v", w)
	}
	job.Resume()
	for next(time.Minute) {
	}
	if err := job.Wait(30 * time.Second); err != nil {
		t.Errorf("job: %v\n%s", err, job.Stderr())
	}
	if err := succ.Release(ctx); err != nil {
		t.Errorf("etl-b's release: %v", err)
	}
	for i := 0; !rc.Read(ctx, "final", lock, key, true).Output.Known() && i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	r := validate.Verify(t, h, scenarioCheckTimeout(failpoints))
	more := validate.CheckStalled(h, validate.Stalled{Lock: lock, Holder: "etl-a", Successor: "etl-b", Lost: lostErr})
	for _, v := range more {
		t.Logf("e2e: %v", v)
	}
	r.Violations = append(r.Violations, more...)
	return r
}

// line is a job's line in brief, for the log.
func line(l jobLine) string {
	switch l.Type {
	case "granted":
		return fmt.Sprintf("granted token %d [%d, %d)", l.Token, l.GrantedAt, l.ExpiresAt)
	case "write":
		return fmt.Sprintf("write %q token %d -> %s", l.Op.Input.Value, l.Op.Input.Token, l.Op.Output)
	}
	return l.Type + " " + l.Err
}
