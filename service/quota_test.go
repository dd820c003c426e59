package service_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

func openWithQuota(t *testing.T, path string, q service.StoreQuota) *engine.Direct {
	t.Helper()
	svc, err := engine.OpenDirect(context.Background(), path, repo.Options{}, service.Config{Quota: q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	return svc
}

// quotaBackends are the databases the quota runs on; file is a fresh SQLite
// file or PostgreSQL schema, opened again by reopen tests.
var quotaBackends = []struct {
	name string
	path func(t *testing.T) string
}{
	{"sqlite-memory", func(*testing.T) string { return repo.MemoryPath }},
	{"sqlite-file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "q.db") }},
	{"postgres", func(t *testing.T) string { return pgtest.DSN(t) }},
}

// TestStoreQuota: a write that would take a lock's store beyond its keys or
// bytes answers quota_exceeded and changes nothing, not even the fence; an
// overwrite within the bytes is accepted at the keys' limit; a stale token
// is reported before the quota; other locks have their own quota.
func TestStoreQuota(t *testing.T) {
	ctx := context.Background()
	for _, b := range quotaBackends {
		t.Run(b.name, func(t *testing.T) {
			// 3 keys; 40 bytes of keys and values.
			svc := openWithQuota(t, b.path(t), service.StoreQuota{MaxKeys: 3, MaxBytes: 40})
			write := func(lock, key, value string, token int64) error {
				t.Helper()
				_, err := svc.Write(ctx, 0, lk.WriteRequest{Lock: lock, Key: key, Value: value, Token: token})
				if err != nil && !errors.Is(err, lk.ErrQuotaExceeded) && !errors.Is(err, lk.ErrStaleToken) {
					t.Fatalf("write %s/%s: %v", lock, key, err)
				}
				return err
			}
			read := func(lock, key string) string {
				t.Helper()
				r, err := svc.Read(ctx, 0, lk.ReadRequest{Lock: lock, Key: key})
				if err != nil {
					t.Fatal(err)
				}
				if r.Value == nil {
					return "<none>"
				}
				return fmt.Sprintf("%s@%d", *r.Value, r.Token)
			}
			ok := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
			}
			over := func(err error) {
				t.Helper()
				if !errors.Is(err, lk.ErrQuotaExceeded) {
					t.Fatalf("got %v, want quota_exceeded", err)
				}
			}
			ok(write("L", "k1", "aaaaaaaa", 1)) // 10 bytes
			ok(write("L", "k2", "bbbbbbbb", 1)) // 20
			ok(write("L", "k3", "cccccccc", 2)) // 30, 3 keys
			// A fourth key, with a higher token: refused, and the fence
			// stays at 2.
			over(write("L", "k4", "d", 9))
			if got := read("L", "k4"); got != "<none>" {
				t.Errorf("k4 after the refused write: %s", got)
			}
			ok(write("L", "k1", "a2", 2)) // token 2 still accepted: the refused 9 raised nothing; 24 bytes
			// Overwrites at the keys' limit are fine within the bytes.
			ok(write("L", "k2", "b2bbbbbbbbbbbbbb", 2)) // 32 bytes
			// Beyond the bytes: refused, the old value stays.
			over(write("L", "k3", "c2cccccccccccccccc", 3)) // 42 bytes
			if got := read("L", "k3"); got != "cccccccc@2" {
				t.Errorf("k3 after the refused overwrite: %s", got)
			}
			ok(write("L", "k3", "c3cccccccccccccc", 3)) // exactly 40 bytes
			// A stale token is stale first.
			if err := write("L", "k9", "x", 1); !errors.Is(err, lk.ErrStaleToken) {
				t.Errorf("stale write over the quota: %v, want stale_token", err)
			}
			// One value alone beyond the bytes, on a fresh lock.
			over(write("M", "k", strings.Repeat("x", 40), 1))
			if got := read("M", "k"); got != "<none>" {
				t.Errorf("M/k after the refused write: %s", got)
			}
			ok(write("M", "k", strings.Repeat("x", 38), 1)) // 1 + 38 = 39 bytes
			// Bytes are UTF-8 bytes: é is two.
			over(write("N", "k", strings.Repeat("é", 20), 1))
			ok(write("N", "k", strings.Repeat("é", 19), 1))
			// In a group commit (the server's), a refused write is an
			// answer, not a failure: the group commits the rest.
			var refused, accepted error
			if err := svc.Group(ctx, func() {
				refused = write("G", "k", strings.Repeat("x", 40), 1)
				accepted = write("G", "j", "x", 1)
			}); err != nil {
				t.Fatalf("group with a refused write: %v", err)
			}
			over(refused)
			ok(accepted)
			if got := read("G", "j"); got != "x@1" {
				t.Errorf("G/j after the group: %s", got)
			}
		})
	}
}

// TestStoreQuotaLowered: a database written without a quota, or with a
// higher one, is held to the one it is opened with from the first write:
// its usage was counted all along. Only growth is refused, so what a lock
// already holds can still be overwritten, and shrunk.
func TestStoreQuotaLowered(t *testing.T) {
	ctx := context.Background()
	for _, b := range quotaBackends[1:] {
		t.Run(b.name, func(t *testing.T) {
			path := b.path(t)
			svc, err := engine.OpenDirect(ctx, path, repo.Options{}, service.Config{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				if _, err := svc.Write(ctx, 0, lk.WriteRequest{Lock: "L", Key: fmt.Sprintf("k%d", i), Value: "0123456789", Token: 1}); err != nil {
					t.Fatal(err)
				}
			}
			svc.Close()
			svc = openWithQuota(t, path, service.StoreQuota{MaxKeys: 3, MaxBytes: 40}) // L holds 5 keys, 60 bytes
			for _, c := range []struct {
				key, value string
				want       error
			}{
				{"k5", "x", lk.ErrQuotaExceeded},                     // a sixth key
				{"k0", "0123456789x", lk.ErrQuotaExceeded},           // 61 bytes
				{"k0", "0123456789", nil},                            // 60 bytes: no growth
				{"k1", "0", nil},                                     // 51 bytes
				{"k2", "0123456789", nil},                            // 51 bytes
				{"k2", strings.Repeat("0", 19), lk.ErrQuotaExceeded}, // 60 bytes, over 40 and up from 51
			} {
				_, err := svc.Write(ctx, 0, lk.WriteRequest{Lock: "L", Key: c.key, Value: c.value, Token: 1})
				if (c.want == nil) != (err == nil) || (err != nil && !errors.Is(err, c.want)) {
					t.Errorf("write %s=%q: %v, want %v", c.key, c.value, err, c.want)
				}
			}
		})
	}
}

// TestReplayHasNoQuota: the contract has no quota, so a service opened as
// `leasekeeper run` opens it takes writes far beyond the server's default
// keys and bytes.
func TestReplayHasNoQuota(t *testing.T) {
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	n := service.DefaultStoreMaxKeys + 100 // of 4 KiB each: over the default bytes too
	if n*(4<<10) <= service.DefaultStoreMaxBytes {
		t.Fatal("the writes below stay within the default bytes")
	}
	in, err := harness.Decode(strings.NewReader(fmt.Sprintf(`[["repeat", 0, ["write", "L", "k{i}", %q, 1], %d, 0]]`,
		strings.Repeat("v", 4<<10), n)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := harness.Run(context.Background(), svc, in.Ops)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != fmt.Sprintf("[map[ops:%d results:map[ok:%d]]]", n, n) {
		t.Errorf("replay of %d writes of 4 KiB to one lock: %s, want every one ok", n, s)
	}
}
