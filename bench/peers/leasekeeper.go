package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// lkFleet is the `leasekeeper serve` processes of one cell, on one new
// database: a SQLite file, or a fresh schema of a PostgreSQL database that
// they share.
type lkFleet struct {
	servers []*process
	addrs   []string     // host:port of each server
	drop    func() error // drops the PostgreSQL schema; nil on SQLite
	spec    pairSpec
	// database is the CPU time of the database the servers share, where
	// known: a throwaway PostgreSQL's processes. nil on SQLite, whose
	// work is the servers' own.
	database func() (time.Duration, bool)
}

// startTimeout bounds a server's start: migrations included, on a busy machine.
const startTimeout = 60 * time.Second

// startLeasekeeper starts n servers of bin on db, one after the other: the
// first applies the migrations, and the others then find the schema ready.
// Each listens on a free loopback port, which it writes to its ready file;
// it is ready once GET /v1/ready answers 200. The audit log goes to a file,
// as in a deployment.
func startLeasekeeper(ctx context.Context, bin, dir, db string, n int, spec pairSpec, drop func() error) (_ *lkFleet, err error) {
	f := &lkFleet{drop: drop, spec: spec}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	for i := range n {
		ready := filepath.Join(dir, fmt.Sprintf("ready-%d", i))
		p, err := startProcess(fmt.Sprintf("leasekeeper serve %d", i+1), filepath.Join(dir, fmt.Sprintf("serve-%d.log", i)),
			bin, "serve", "--db", db, "--listen", "127.0.0.1:0", "--ready-file", ready,
			"--audit-log", filepath.Join(dir, fmt.Sprintf("audit-%d.log", i)))
		if err != nil {
			return nil, err
		}
		f.servers = append(f.servers, p)
		addr, err := serveReady(ctx, p, ready)
		if err != nil {
			return nil, err
		}
		f.addrs = append(f.addrs, addr)
	}
	return f, nil
}

// serveReady waits for p to write its address to its ready file and to
// answer GET /v1/ready with 200, and returns the address.
func serveReady(ctx context.Context, p *process, readyFile string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	addr := ""
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for {
		if p.exited() {
			return "", fmt.Errorf("%s exited before it was ready; its log ends:\n%s", p.name, p.tail())
		}
		if addr == "" {
			// The file appears whole: serve writes it under another name and renames it.
			if b, err := os.ReadFile(readyFile); err == nil {
				addr = strings.TrimSpace(string(b))
			}
		}
		if addr != "" {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/ready", nil)
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return addr, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s not ready after %v: %w", p.name, startTimeout, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the servers, together since each may take a while to drain,
// then drops the schema, which then waits for no server's lock.
func (f *lkFleet) stop() error {
	errs := make(chan error, len(f.servers))
	for _, p := range f.servers {
		go func() { errs <- p.stop() }()
	}
	var all []error
	for range f.servers {
		all = append(all, <-errs)
	}
	if f.drop != nil {
		all = append(all, f.drop())
	}
	return errors.Join(all...)
}

// counts reads the committer's counters from each server's /metrics and
// adds them up. An old build without them counts no operation.
func (f *lkFleet) counts(ctx context.Context) (engineCounts, error) {
	var sum engineCounts
	hc := &http.Client{Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	for _, addr := range f.addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return sum, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return sum, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return sum, err
		}
		if resp.StatusCode != http.StatusOK {
			return sum, fmt.Errorf("GET /metrics of %s: %s", addr, resp.Status)
		}
		c := parseCounts(body)
		sum.roundTrips += c.roundTrips
		sum.operations += c.operations
		sum.groups += c.groups
		sum.commitSeconds += c.commitSeconds
		sum.histOperations += c.histOperations
		sum.histGroups += c.histGroups
	}
	return sum, nil
}

// serverCPU is the CPU time of the fleet's servers, added up, and of the
// PostgreSQL they share where it is known; unknown where it is not.
func (f *lkFleet) serverCPU() (time.Duration, bool) {
	var sum time.Duration
	if f.database != nil {
		t, ok := f.database()
		if !ok {
			return 0, false
		}
		sum = t
	}
	for _, p := range f.servers {
		t, ok := p.cpu()
		if !ok {
			return 0, false
		}
		sum += t
	}
	return sum, true
}

// parseCounts picks the committer's counters out of a Prometheus text
// exposition; a counter missing counts 0.
func parseCounts(body []byte) engineCounts {
	var c engineCounts
	for line := range strings.Lines(string(body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		var into *float64
		switch name {
		case "leasekeeper_round_trips_total":
			into = &c.roundTrips
		case "leasekeeper_operations_total":
			into = &c.operations
		case "leasekeeper_groups_total":
			into = &c.groups
		case "leasekeeper_commit_duration_seconds_sum":
			into = &c.commitSeconds
		case "leasekeeper_commit_operations_sum":
			into = &c.histOperations
		case "leasekeeper_commit_operations_count":
			into = &c.histGroups
		default:
			continue
		}
		if x, err := strconv.ParseFloat(value, 64); err == nil {
			*into = x
		}
	}
	return c
}

// worker i is client "c<i>" on server i mod n.
func (f *lkFleet) worker(i int) (worker, error) {
	return &lkWorker{
		conn:   newHTTPConn(f.addrs[i%len(f.addrs)], f.spec.wait+10*time.Second),
		client: "c" + strconv.Itoa(i),
		spec:   f.spec,
	}, nil
}

// lkWorker is one leasekeeper client: one keep-alive connection, a
// blocking acquire ("wait") and a release per pair.
type lkWorker struct {
	conn   *httpConn
	client string
	spec   pairSpec
	body   []byte
}

func (w *lkWorker) pair(_ context.Context, name string) (pairTimes, error) {
	var p pairTimes
	p.start = time.Now()
	status, answer, err := w.conn.post("/v1/acquire", w.request(name, true))
	if err != nil {
		w.withdraw(name)
		return p, err
	}
	token, ok := grantToken(status, answer)
	if !ok {
		err := fmt.Errorf("acquire %s by %s: %d %s", name, w.client, status, bytes.TrimSpace(answer))
		w.withdraw(name)
		return p, err
	}
	p.acquired, p.token = time.Now(), token
	if w.spec.hold > 0 {
		time.Sleep(w.spec.hold)
	}
	p.releasing = time.Now()
	status, answer, err = w.conn.post("/v1/release", w.request(name, false))
	if err != nil {
		return p, err
	}
	if !released(status, answer) {
		return p, fmt.Errorf("release %s by %s: %d %s", name, w.client, status, bytes.TrimSpace(answer))
	}
	p.end = time.Now()
	return p, nil
}

// withdraw leaves name neither held nor waited for by this client after an
// acquire that failed, whatever its outcome was, so that the next pair
// starts clean.
func (w *lkWorker) withdraw(name string) {
	w.conn.post("/v1/release", w.request(name, false))
}

// request is the body of an acquire (with its ttl and wait) or a release.
// Names here are plain ASCII, with nothing to escape.
func (w *lkWorker) request(name string, acquire bool) []byte {
	b := append(w.body[:0], `{"client":"`...)
	b = append(b, w.client...)
	b = append(b, `","lock":"`...)
	b = append(b, name...)
	b = append(b, '"')
	if acquire {
		b = append(b, `,"ttl":`...)
		b = strconv.AppendInt(b, int64(w.spec.ttl), 10)
		b = append(b, `,"wait":`...)
		b = strconv.AppendInt(b, int64(w.spec.wait/time.Second), 10)
	}
	b = append(b, '}')
	w.body = b
	return b
}

func (w *lkWorker) close() { w.conn.close() }

// How a grant and a release answer start, as the server writes them: the
// usual answers are recognised without decoding (the clients share the CPU
// with the server), anything else is decoded.
var (
	grantedStart = []byte(`{"outcome":"granted",`)
	tokenField   = []byte(`"token":`)
	releasedBody = []byte(`{"outcome":"released"}`)
)

// grantToken returns the fencing token of a 200 answer that grants the
// lock, and false for any other answer.
func grantToken(status int, body []byte) (int64, bool) {
	if status != http.StatusOK {
		return 0, false
	}
	body = bytes.TrimSpace(body)
	if bytes.HasPrefix(body, grantedStart) {
		if i := bytes.Index(body, tokenField); i >= 0 {
			rest := body[i+len(tokenField):]
			n := 0
			for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
				n++
			}
			if t, err := strconv.ParseInt(string(rest[:n]), 10, 64); err == nil && t > 0 {
				return t, true
			}
		}
	}
	var a struct {
		Outcome string `json:"outcome"`
		Token   int64  `json:"token"`
	}
	if json.Unmarshal(body, &a) != nil || a.Outcome != "granted" || a.Token < 1 {
		return 0, false
	}
	return a.Token, true
}

// released reports whether a release was answered "released".
func released(status int, body []byte) bool {
	if status != http.StatusOK {
		return false
	}
	body = bytes.TrimSpace(body)
	if bytes.Equal(body, releasedBody) {
		return true
	}
	var a struct {
		Outcome string `json:"outcome"`
	}
	return json.Unmarshal(body, &a) == nil && a.Outcome == "released"
}
