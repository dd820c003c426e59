package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	lkserver "github.com/leasekeeper/leasekeeper/server"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestLoadAgainstServer runs both client sides briefly against a real server
// on loopback and checks that the table reports completed pairs and no errors.
func TestLoadAgainstServer(t *testing.T) {
	svc, err := service.Open(context.Background(), filepath.Join(t.TempDir(), "load.db"), service.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := lkserver.New(svc, lkserver.Options{})
	hs := httptest.NewServer(srv.Handler())
	defer func() { srv.Drain(); hs.Close(); srv.Close(); svc.Close() }()
	row := regexp.MustCompile(`(?m)^\| (\d+) \| (\d+) \| [\d.]+ \| [\d.]+ \| (\d+) \|$`)
	for _, mode := range []string{"raw", "net"} {
		cfg, err := parseFlags([]string{"--server", hs.URL, "--clients", "1,4", "--duration", "300ms",
			"--warmup", "0s", "--http", mode})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), cfg, &out); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out.String())
		}
		rows := row.FindAllStringSubmatch(out.String(), -1)
		if len(rows) != 2 {
			t.Fatalf("%s: want 2 table rows, got:\n%s", mode, out.String())
		}
		for _, r := range rows {
			pairs, _ := strconv.Atoi(r[2])
			if pairs == 0 || r[3] != "0" {
				t.Errorf("%s: %s clients: %s pairs/s, %s errors", mode, r[1], r[2], r[3])
			}
		}
	}
}
