package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	_ "modernc.org/sqlite"
)

// TestRollbackRefused is issue 20's database that went back in time: a
// server killed (kill -9) under load, its -wal moved aside, as a careless
// operator or a lost disk would. The database is then behind the tokens the
// server issued (the audit log holds them), and a restart must refuse it,
// saying what went back and how to accept it; with --accept-rollback it
// starts, and its next token is above every token ever issued.
func TestRollbackRefused(t *testing.T) {
	dir := t.ArtifactDir()
	audit := filepath.Join(dir, "audit.jsonl")
	c := cluster.Start(t, cluster.Options{Dir: dir, Args: []string{"--audit-log", audit}})
	s := c.Servers[0]
	db := c.DB()
	hc := &http.Client{Timeout: 5 * time.Second}
	var issued int64
	// A kill right after a commit that checkpointed the WAL into the file
	// loses nothing: then the server starts again (the database is not
	// behind) and the round is run again.
	for round := 1; ; round++ {
		if round > 1 {
			s.Start()
		}
		loadAndKill(s, hc)
		issued = highestAuditedToken(t, audit)
		if issued == 0 {
			t.Fatalf("the audit log holds no token: no load reached the server")
		}
		for _, suffix := range []string{"-wal", "-shm"} {
			if err := os.Rename(db+suffix, filepath.Join(dir, fmt.Sprintf("aside%d%s", round, suffix))); err != nil {
				t.Fatal(err)
			}
		}
		left, seen := fileHighestToken(t, db), markSeenToken(t, db+".mark")
		t.Logf("round %d: without its -wal the database's highest token is %d; the mark saw %d; the audit log holds %d", round, left, seen, issued)
		if left < seen {
			break
		}
		if round == 3 {
			t.Fatalf("three kills lost nothing without the -wal")
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cluster.Binary(t), "serve", "--db", db, "--listen", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("serve on the database without its -wal still ran after 30 s (the audit log's highest token is %d); it should have refused:\n%s", issued, out)
	}
	if err == nil || !strings.Contains(string(out), "went back") || !strings.Contains(string(out), "highest token") ||
		!strings.Contains(string(out), "--accept-rollback") {
		t.Fatalf("serve on the database without its -wal: %v, want a refusal naming what went back and --accept-rollback:\n%s", err, out)
	}
	t.Logf("refused: %s", bytes.TrimSpace(out))

	// Accepted: every counter moves past the mark.
	c2 := cluster.Start(t, cluster.Options{Dir: t.TempDir(), DB: db, Args: []string{"--accept-rollback"}})
	var got struct {
		Outcome string `json:"outcome"`
		Token   int64  `json:"token"`
	}
	url := c2.Servers[0].URL()
	for i := range 4 {
		// The leases the database kept, whose holders are gone, are let go
		// first: the lock is then granted at once.
		for w := range 8 {
			rollbackPost(hc, url+"/v1/release", fmt.Sprintf(`{"client":"w%d","lock":"L%d"}`, w, i))
		}
		body, err := rollbackPostBody(hc, c2.Servers[0].URL()+"/v1/acquire", fmt.Sprintf(`{"client":"after","lock":"L%d","ttl":60}`, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(body, &got); err != nil || got.Outcome != "granted" {
			t.Fatalf("acquire L%d after the accepted rollback: %s", i, body)
		}
		if got.Token <= issued {
			t.Errorf("after --accept-rollback, L%d's next token is %d, not above the %d the audit log holds: a token issued again", i, got.Token, issued)
		}
		rollbackPost(hc, c2.Servers[0].URL()+"/v1/release", fmt.Sprintf(`{"client":"after","lock":"L%d"}`, i))
	}
	if log := c2.Servers[0].Log(); !strings.Contains(log, "rollback accepted") {
		t.Errorf("no \"rollback accepted\" line in the log:\n%s", log)
	}
}

// loadAndKill runs 8 workers, each acquiring and releasing one of 4 locks
// in turn, for 1.5 s, then kills the server (kill -9) under that load.
func loadAndKill(s *cluster.Server, hc *http.Client) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := fmt.Sprintf("w%d", w)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				lock := fmt.Sprintf("L%d", i%4)
				if rollbackPost(hc, s.URL()+"/v1/acquire", fmt.Sprintf(`{"client":%q,"lock":%q,"ttl":60,"wait":1}`, client, lock)) != nil {
					continue
				}
				rollbackPost(hc, s.URL()+"/v1/release", fmt.Sprintf(`{"client":%q,"lock":%q}`, client, lock))
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	s.Kill()
	close(stop)
	wg.Wait()
}

// fileHighestToken reads the highest token of the SQLite file at path as
// the file holds it, without a -wal (immutable: nothing is written). A file
// that no checkpoint reached yet holds not even the tables, all of them
// still in the -wal (the writer checkpoints every 10,000 pages): 0 then.
func fileHighestToken(t *testing.T, path string) int64 {
	d, err := sql.Open("sqlite", "file:"+path+"?immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var tables int
	if err := d.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'locks'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables == 0 {
		return 0
	}
	var top int64
	if err := d.QueryRow(`SELECT coalesce(max(last_token), 0) FROM locks`).Scan(&top); err != nil {
		t.Fatal(err)
	}
	return top
}

// markSeenToken is the highest token the high-water mark at path has seen.
func markSeenToken(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Seen struct {
			Token int64 `json:"token"`
		} `json:"seen"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		t.Fatalf("the mark %s: %v: %q", path, err, b)
	}
	return m.Seen.Token
}

func rollbackPostBody(hc *http.Client, url, body string) ([]byte, error) {
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// rollbackPost sends body and answers an error unless it was granted or released.
func rollbackPost(hc *http.Client, url, body string) error {
	b, err := rollbackPostBody(hc, url, body)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(`"granted"`)) && !bytes.Contains(b, []byte(`"released"`)) {
		return fmt.Errorf("%s", b)
	}
	return nil
}

// highestAuditedToken is the highest "token" of the audit log's lines.
func highestAuditedToken(t *testing.T, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var top int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Token int64 `json:"token"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil {
			top = max(top, line.Token)
		}
	}
	return top
}
