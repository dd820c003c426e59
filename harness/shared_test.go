package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/internal/model"
	"github.com/leasekeeper/leasekeeper/internal/pgtest"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/service"
)

// alternating is an Engine over two services sharing one PostgreSQL
// database, as two servers do: each operation goes to one of them at
// random, in its own transaction. Whatever one of them kept from its last
// transaction would be stale after the other's, so results equal to one
// service's prove that neither trusts anything but the database.
type alternating struct {
	svcs [2]*engine.Direct
	rng  *rand.Rand
}

func (a *alternating) pick() *engine.Direct { return a.svcs[a.rng.IntN(2)] }

func (a *alternating) Clock() (int64, bool) { return a.pick().Clock() }
func (a *alternating) Advance(ctx context.Context, ts int64) error {
	return a.pick().Advance(ctx, ts)
}
func (a *alternating) Acquire(ctx context.Context, ts int64, q lk.AcquireRequest) (lk.AcquireResult, error) {
	return a.pick().Acquire(ctx, ts, q)
}
func (a *alternating) Renew(ctx context.Context, ts int64, q lk.RenewRequest) (lk.RenewResult, error) {
	return a.pick().Renew(ctx, ts, q)
}
func (a *alternating) Release(ctx context.Context, ts int64, q lk.ReleaseRequest) (lk.ReleaseResult, error) {
	return a.pick().Release(ctx, ts, q)
}
func (a *alternating) Inspect(ctx context.Context, ts int64, q lk.InspectRequest) (lk.InspectResult, error) {
	return a.pick().Inspect(ctx, ts, q)
}
func (a *alternating) Write(ctx context.Context, ts int64, q lk.WriteRequest) (lk.WriteResult, error) {
	return a.pick().Write(ctx, ts, q)
}
func (a *alternating) Read(ctx context.Context, ts int64, q lk.ReadRequest) (lk.ReadResult, error) {
	return a.pick().Read(ctx, ts, q)
}
func (a *alternating) Status(ctx context.Context, ts int64, q lk.StatusRequest) (lk.StatusResult, error) {
	return a.pick().Status(ctx, ts, q)
}

// TestDifferentialTwoServices is TestDifferential on PostgreSQL with every
// operation sent to one of two services on the same database at random.
// LEASEKEEPER_DIFF_SEQUENCES sets the number of sequences (default 300: an
// operation here is a transaction of several round trips),
// LEASEKEEPER_DIFF_SEED the seed.
func TestDifferentialTwoServices(t *testing.T) {
	n := envInt(t, "LEASEKEEPER_DIFF_SEQUENCES", 300)
	if testing.Short() {
		n = 50
	}
	seed := uint64(envInt(t, "LEASEKEEPER_DIFF_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("%d sequences, seed %d (LEASEKEEPER_DIFF_SEED=%d reproduces them)", n, seed, seed)
	dsn := pgtest.DSN(t)
	e := &alternating{svcs: [2]*engine.Direct{testutil.OpenDirect(t, dsn, service.Config{}), testutil.OpenDirect(t, dsn, service.Config{})}}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for i := 0; i < n; i++ {
		// Empty the database between sequences; the services keep
		// nothing between transactions, so they need no reopening.
		if _, err := conn.Exec(ctx, `DELETE FROM leases; DELETE FROM queue_entries; DELETE FROM clients;
			DELETE FROM locks; DELETE FROM store_fences; DELETE FROM store_values;
			UPDATE service SET clock = NULL, last_client_age = 0`); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		ops := genSequence(rng)
		e.rng = rand.New(rand.NewPCG(seed, uint64(i)+1<<32))
		got, err := harness.Run(ctx, e, ops)
		if err != nil {
			t.Fatalf("seed %d sequence %d: engine failed: %v", seed, i, err)
		}
		raw := make([]json.RawMessage, len(ops))
		for j, op := range ops {
			raw[j], _ = json.Marshal(op)
		}
		if d := harness.Diff(ops, model.Run(raw), got); d != "" {
			all, _ := json.Marshal(ops)
			t.Fatalf("%s: two services (got) disagree with the model (want):\n%s\nwhole sequence:\n%s",
				fmt.Sprintf("seed %d sequence %d", seed, i), d, all)
		}
	}
}
