package main

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestBackupWhileServing: a backup taken while a server runs under writes is
// a consistent, self-contained database holding what was committed, and
// backup refuses to overwrite a file.
func TestBackupWhileServing(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "live.db")
	srv := startServe(t, bin, db)
	if got := postBody(t, srv.URL()+"/v1/acquire", `{"client": "a", "lock": "L", "ttl": 3600}`); !strings.HasPrefix(got, `{"outcome":"granted","token":1,`) {
		t.Fatalf("acquire: %s", got)
	}
	if got := postBody(t, srv.URL()+"/v1/write", `{"lock": "L", "key": "before", "value": "v", "token": 1}`); got != `{"outcome":"ok"}` {
		t.Fatalf("write: %s", got)
	}
	// Writes go on during the backups.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	hc := validated(t)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if got, err := postWith(hc, srv.URL()+"/v1/write", `{"lock": "L", "key": "during", "value": "v", "token": 1}`); err != nil || got != `{"outcome":"ok"}` {
				t.Errorf("write %d during the backup: %s, %v", i, got, err)
				return
			}
		}
	}()
	out := filepath.Join(dir, "copy.db")
	time.Sleep(50 * time.Millisecond)
	if b, err := exec.Command(bin, "backup", "--db", db, out).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v\n%s", err, b)
	}
	close(stop)
	wg.Wait()
	if b, err := exec.Command(bin, "backup", "--db", db, out).CombinedOutput(); err == nil || !strings.Contains(string(b), "already exists") {
		t.Errorf("a second backup to the same file: %v %s", err, b)
	}
	raw, err := sql.Open("sqlite", "file:"+out+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var check string
	if err := raw.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check of the backup: %q %v", check, err)
	}
	raw.Close()
	svc := testutil.OpenDirect(t, out, service.Config{})
	ts, _ := svc.Clock()
	in, err := svc.Inspect(context.Background(), ts, lk.InspectRequest{Lock: "L"})
	if err != nil || len(in.Holders) != 1 || in.Holders[0].Client != "a" || in.Holders[0].Token != 1 {
		t.Errorf("the backup's lock state: %+v %v", in, err)
	}
	if v, err := svc.Read(context.Background(), ts, lk.ReadRequest{Lock: "L", Key: "before"}); err != nil || v.Value == nil || *v.Value != "v" || v.Token != 1 {
		t.Errorf("the backup's store: %+v %v", v, err)
	}
}
