package service_test

import (
	"context"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestSummary: what serve logs at start, on every backend, read without
// moving the clock.
func TestSummary(t *testing.T) {
	ctx := context.Background()
	for _, b := range testutil.Backends {
		t.Run(b.Name, func(t *testing.T) {
			svc := b.Open(t)
			if s, err := svc.Summary(ctx); err != nil || s != (service.Summary{}) {
				t.Errorf("summary of a new database = %+v, %v; want zeros and no clock", s, err)
			}
			for _, op := range []struct {
				ts     int64
				client string
				lock   string
			}{{100, "a", "L"}, {101, "b", "M"}, {102, "c", "L"}} {
				if _, err := svc.Acquire(ctx, op.ts, lk.AcquireRequest{Client: op.client, Lock: op.lock, TTL: 1, Mode: lk.Exclusive}); err != nil {
					t.Fatal(err)
				}
			}
			// c's acquire at 102 found a's lease (100 to 101) lapsed: L's
			// second token.
			want := service.Summary{Summary: repo.Summary{Locks: 2, HighestToken: 2}, Clock: 102, ClockSet: true}
			if s, err := svc.Summary(ctx); err != nil || s != want {
				t.Errorf("summary = %+v, %v; want %+v", s, err, want)
			}
		})
	}
}
