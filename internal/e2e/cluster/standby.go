package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
)

// pgPair is a PostgreSQL primary and its synchronous standby, each in a
// directory of its own, made and stopped by .ci/postgres.
type pgPair struct {
	script           string
	primary, standby string
}

// startStandby starts the primary and its synchronous standby, registers
// their stop, and returns the servers' --db: both hosts, with
// target_session_attrs=read-write, as docs/deployment.md says to give them.
func (c *Cluster) startStandby(t testing.TB) string {
	t.Helper()
	if !c.opts.Postgres {
		t.Fatalf("e2e: Standby needs Postgres")
	}
	// As pgtest.DSN does: skip only outside CI, when asked to.
	switch env := os.Getenv(pgtest.EnvVar); {
	case env == "skip" && os.Getenv("CI") != "":
		t.Fatalf("e2e: %s=skip, but CI never skips the PostgreSQL tests", pgtest.EnvVar)
	case env == "skip":
		t.Skipf("e2e: skipped, since %s=skip", pgtest.EnvVar)
	case env == "":
		t.Fatalf("e2e: %s is not set: this test needs PostgreSQL (run `bash .ci/run`, or set it to skip)", pgtest.EnvVar)
	}
	p := &pgPair{script: ciPostgres(t)}
	base := t.TempDir()
	if os.Geteuid() == 0 {
		// .ci/postgres runs PostgreSQL as the postgres user, which must
		// reach its directories: t.TempDir and the one above it are 0700.
		// Entering them is enough.
		for _, d := range []string{filepath.Dir(base), base} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.primary, p.standby = filepath.Join(base, "primary"), filepath.Join(base, "standby")
	// Each stop is registered before its start, since a start that fails
	// half-way leaves the directory to its caller; cleanups run last
	// first, so the standby stops before the primary, and both after the
	// servers (whose cleanup Start registers later).
	for _, d := range []string{p.primary, p.standby} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := p.run("stop", d); err != nil {
				t.Errorf("e2e: stopping the PostgreSQL in %s: %v", d, err)
			}
		})
	}
	var hosts []string
	for _, args := range [][]string{{"start", p.primary}, {"standby", p.primary, p.standby}} {
		out, err := p.run(args...)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(out)
		if err != nil || u.Host == "" {
			t.Fatalf("e2e: .ci/postgres %s printed %q, not a URL", args[0], out)
		}
		hosts = append(hosts, u.Host)
	}
	c.pg = p
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// ciPostgres is .ci/postgres of this module: found from the working
// directory up to go.mod.
func ciPostgres(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".ci", "postgres")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("e2e: no go.mod above the working directory, so no .ci/postgres")
		}
		dir = parent
	}
}

func (p *pgPair) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{p.script}, args...)...)
	// PostgreSQL's durable defaults: synchronous_commit on, so that a
	// commit is acknowledged only once the standby has it.
	cmd.Env = append(os.Environ(), "LEASEKEEPER_PG_DURABLE=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf(".ci/postgres %s: %v\n%s", args[0], err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

func (c *Cluster) dbFault(kind string, settle time.Duration) {
	c.hmu.Lock()
	h := c.opts.History
	c.hmu.Unlock()
	if h != nil {
		h.Fault(kind, -1, 0, settle)
	}
}

// CrashPrimary stops the primary (Options.Standby) as a power cut would:
// an immediate shutdown, which leaves the servers' connections dead and
// the standby as it was. The servers are left alone.
func (c *Cluster) CrashPrimary() {
	c.t.Helper()
	if c.pg == nil {
		c.t.Fatal("e2e: CrashPrimary needs Options.Standby")
	}
	c.dbFault(history.FaultPrimaryCrash, 0)
	if _, err := c.pg.run("crash", c.pg.primary); err != nil {
		c.t.Fatal(err)
	}
}

// Promote makes the standby (Options.Standby) a primary, and returns once
// it takes writes, as an operator or a failover manager would. The
// servers find it on their own: target_session_attrs=read-write.
func (c *Cluster) Promote() {
	c.t.Helper()
	if c.pg == nil {
		c.t.Fatal("e2e: Promote needs Options.Standby")
	}
	if _, err := c.pg.run("promote", c.pg.standby); err != nil {
		c.t.Fatal(err)
	}
	c.dbFault(history.FaultPromote, c.settle())
}
