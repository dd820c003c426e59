package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is the PostgreSQL that the leasekeeper servers run on: a
// throwaway one from the repository's .ci/postgres, or one given by URL.
type pgServer struct {
	url  string
	stop func() error // stops the throwaway server; nothing for a given one
	// dataDir is the throwaway cluster's data folder, whose postmaster's
	// tree is what PostgreSQL's CPU time is read from; "" for a server
	// given by URL (elsewhere, or shared with other work), whose time is
	// unknown.
	dataDir string
}

// cpu is the CPU time the cluster's processes have used so far.
func (pg *pgServer) cpu() (time.Duration, bool) {
	if pg.dataDir == "" {
		return 0, false
	}
	pid := postmaster(pg.dataDir)
	if pid == 0 {
		return 0, false
	}
	return treeCPU(pid)
}

// startPostgres starts a throwaway cluster with .ci/postgres, durable
// (LEASEKEEPER_PG_DURABLE=1: fsync, synchronous_commit and
// full_page_writes on, PostgreSQL's defaults), so that an answer means the
// change is on disk, as with etcd and with SQLite's synchronous=FULL.
// Without that variable the script turns all three off and would flatter
// PostgreSQL. parent must be a folder the postgres user can enter.
func startPostgres(ctx context.Context, repo, parent string, log io.Writer) (*pgServer, error) {
	script := filepath.Join(repo, ".ci", "postgres")
	dir, err := os.MkdirTemp(parent, "peers-pg-")
	if err != nil {
		return nil, err
	}
	stop := func() error {
		cmd := exec.Command(script, "stop", dir)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf(".ci/postgres stop: %w", err)
		}
		return nil
	}
	cmd := exec.CommandContext(ctx, script, "start", dir)
	cmd.Env = append(os.Environ(), "LEASEKEEPER_PG_DURABLE=1")
	cmd.Stderr = log
	// A Ctrl-C is this program's to handle: it stops the cluster itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		stop()
		return nil, fmt.Errorf(".ci/postgres start: %w", err)
	}
	return &pgServer{url: strings.TrimSpace(string(out)), stop: stop, dataDir: filepath.Join(dir, "data")}, nil
}

// describe names the server's version and the settings that make it
// durable or not, read from the server itself.
func (pg *pgServer) describe(ctx context.Context) (string, error) {
	conn, err := pgConnect(ctx, pg.url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version, fsync, syncCommit, fullPages string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('fsync'),
		current_setting('synchronous_commit'), current_setting('full_page_writes')`).Scan(&version, &fsync, &syncCommit, &fullPages)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("PostgreSQL %s, fsync %s, synchronous_commit %s, full_page_writes %s", version, fsync, syncCommit, fullPages), nil
}

// freshSchema creates an empty schema and returns the server's URL pointed
// at it, and what drops it. pgx sends a parameter it does not know itself
// (search_path) to the server as a setting of every connection it opens,
// so every connection of the leasekeeper servers' pools lands in it.
func (pg *pgServer) freshSchema(ctx context.Context) (string, func() error, error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "peers_" + hex.EncodeToString(b[:])
	u, err := url.Parse(pg.url)
	if err != nil {
		return "", nil, fmt.Errorf("the PostgreSQL URL does not parse: %w", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	if err := pg.exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() error {
		// A context of its own: an interrupted run still cleans up.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return pg.exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	}
	return u.String(), drop, nil
}

func (pg *pgServer) exec(ctx context.Context, sql string) error {
	conn, err := pgConnect(ctx, pg.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("PostgreSQL: %s: %w", sql, err)
	}
	return nil
}

func pgConnect(ctx context.Context, dsn string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to PostgreSQL: %w", err)
	}
	return conn, nil
}
