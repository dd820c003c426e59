package e2e_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/e2e/traffic"
	"github.com/leasekeeper/leasekeeper/internal/e2e/validate"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

var _ = register(scenario{
	name: "disk-full",
	run: func(t *testing.T, failpoints []string) validate.Result {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		h := history.New()
		c := cluster.Start(t, cluster.Options{History: h, Failpoints: failpoints})
		unit := time.Second
		if len(failpoints) > 0 {
			unit /= 2
		}
		w := traffic.Workload{Duration: 12 * unit, Seed: seed}
		s := c.Servers[0]
		done := make(chan struct{})
		go func() {
			defer close(done)
			traffic.Scenario{Workload: w}.Run(t, c, h)
		}()
		start := time.Now()
		sleepUntil(start, 3*unit)
		// RLIMIT_FSIZE bounds each file, not the disk. The data of the
		// workload hardly grows, so the database file stays near its
		// size; what grows is the WAL, which SQLite fills up to its
		// checkpoint and then writes again from its start. A limit just
		// above the database file's size leaves the checkpoint room to
		// copy pages into it, and makes the WAL's next frames past that
		// size fail: commits fail, as on a full disk.
		db, wal := fileSize(c.DB()), fileSize(c.DB()+"-wal")
		limit := db + 4096
		t.Logf("database %d bytes, WAL %d bytes: limit %d", db, wal, limit)
		pid := s.Pid()
		s.LimitFileSize(limit)
		// Ready while full? The probe's group writes the service row, so
		// it is not, but when the write fits in the WAL's room below the
		// limit (SQLite writes the WAL again from its start after a
		// checkpoint), which does happen.
		ready, probes := 0, 0
		for time.Since(start) < 6*unit {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if s.Ready(ctx) {
				ready++
			}
			cancel()
			probes++
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("GET /v1/ready while the disk was full: 200 to %d of %d", ready, probes)
		if s.Pid() != pid {
			t.Errorf("the server's process %d is gone, with a full disk", pid)
		}
		s.LimitFileSize(-1)
		took := awaitReady(t, s, 20*time.Second)
		t.Logf("server ready %v after the disk had room again", took.Round(time.Millisecond))
		recovered := h.Now()
		<-done

		ops := h.Ops()
		full, freed := faultAt(t, h, "fsize-limit", 0), faultAt(t, h, "fsize-unlimited", 0)
		during := answersIn(ops, 0, full, freed)
		after := answersIn(ops, 0, recovered, h.Now())
		t.Logf("disk full: %v", during)
		t.Logf("room again: %v", after)
		if during.counts["500"]+during.counts["503"] == 0 {
			t.Errorf("no operation failed while the disk was full: %v", during)
		}
		if n := answersIn(ops, -1, 0, h.Now()).counts["no answer"]; n > 0 {
			t.Errorf("%d operations had no answer", n)
		}
		if after.changed == 0 {
			t.Errorf("no change acknowledged once the disk had room again: %v", after)
		}
		r := validate.Verify(t, h, scenarioCheckTimeout(failpoints))
		return r
	},
	catches: []string{failpoint.AcceptStaleWrite},
})

// TestDiskFull: one server on SQLite under the workload; three seconds
// in, its files may no longer grow (RLIMIT_FSIZE, set on the running
// process), for three seconds, as on a full disk. The server must go on
// answering, errors for what it cannot commit, without dying; once the
// limit is lifted it must be ready and acknowledge operations again on its
// own; and nothing it acknowledged may be lost (every check clean).
func TestDiskFull(t *testing.T) {
	runClean(t, "disk-full")
}
