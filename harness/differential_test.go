package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leasekeeper/leasekeeper/harness"
	"github.com/leasekeeper/leasekeeper/internal/model"
	"github.com/leasekeeper/leasekeeper/internal/testutil"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// TestDifferential runs random short operation sequences through the SQLite
// service and through the reference model (internal/model) and requires the
// same result for every operation. Pools of clients and locks are small so
// that queues, shared holders, lapse chains over idle gaps and deadlock
// cycles come up often; malformed operations are mixed in.
//
// LEASEKEEPER_DIFF_SEQUENCES sets the number of sequences (default 3000),
// LEASEKEEPER_DIFF_SEED the seed (default: the clock, printed on failure).
func TestDifferential(t *testing.T) {
	n := envInt(t, "LEASEKEEPER_DIFF_SEQUENCES", 3000)
	if testing.Short() {
		n = 300
	}
	seed := uint64(envInt(t, "LEASEKEEPER_DIFF_SEED", int(time.Now().UnixNano()%1e9)))
	t.Logf("%d sequences, seed %d (LEASEKEEPER_DIFF_SEED=%d reproduces them)", n, seed, seed)
	for i := 0; i < n; i++ {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		ops := genSequence(rng)
		if !agree(t, ops, fmt.Sprintf("seed %d sequence %d", seed, i)) {
			return
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// agree runs ops on a fresh service and on the model and reports the first
// disagreement.
func agree(t *testing.T, ops []any, label string) bool {
	t.Helper()
	raw := make([]json.RawMessage, len(ops))
	for i, op := range ops {
		b, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		raw[i] = b
	}
	svc := testutil.OpenDirect(t, repo.MemoryPath, service.Config{})
	defer svc.Close()
	got, err := harness.Run(context.Background(), svc, ops)
	if err != nil {
		t.Fatalf("%s: engine failed: %v", label, err)
	}
	want := model.Run(raw)
	if d := harness.Diff(ops, want, got); d != "" {
		all, _ := json.Marshal(ops)
		t.Errorf("%s: the service (got) disagrees with the model (want):\n%s\nwhole sequence:\n%s", label, d, all)
		return false
	}
	return true
}

var (
	diffClients = []string{"a", "b", "c", "d", "e"}
	diffLocks   = []string{"L", "M", "N", "a"}
)

// genSequence makes one random sequence of 5-40 operations.
func genSequence(rng *rand.Rand) []any {
	nClients := 2 + rng.IntN(len(diffClients)-1)
	nLocks := 1 + rng.IntN(len(diffLocks))
	client := func() string { return diffClients[rng.IntN(nClients)] }
	lock := func() string { return diffLocks[rng.IntN(nLocks)] }
	ttl := func() any {
		switch r := rng.IntN(40); {
		case r == 0:
			return json.Number([]string{"0", "86401", "-3", "86400"}[rng.IntN(4)])
		case r == 1:
			return json.Number("5.0")
		default:
			return int64(1 + rng.IntN(15))
		}
	}
	var ts int64 = int64(rng.IntN(5)) - 2
	if rng.IntN(50) == 0 {
		ts = math.MaxInt64 - int64(rng.IntN(40)) // leases that saturate at the end of time
	}
	n := 5 + rng.IntN(36)
	ops := make([]any, 0, n)
	for len(ops) < n {
		switch r := rng.IntN(20); {
		case ts > math.MaxInt64-40:
			ts += int64(rng.IntN(int(math.MaxInt64-ts) + 1))
		case r < 15:
			ts += int64(rng.IntN(4))
		case r < 19:
			ts += int64(5 + rng.IntN(30)) // idle gaps: lapse chains
		default:
			ts -= int64(1 + rng.IntN(3)) // time running backwards: rejected
		}
		var op any
		switch r := rng.IntN(100); {
		case r < 38:
			a := []any{"acquire", ts, client(), lock(), ttl()}
			if rng.IntN(2) == 0 {
				a = append(a, []string{"shared", "exclusive"}[rng.IntN(2)])
			}
			op = a
		case r < 53:
			op = []any{"release", ts, client(), lock()}
		case r < 61:
			op = []any{"renew", ts, client(), lock(), ttl()}
		case r < 67:
			op = []any{"inspect", ts, lock()}
		case r < 72:
			op = []any{"status", ts, client()}
		case r < 79:
			op = []any{"write", ts, lock(), []string{"k", "j"}[rng.IntN(2)],
				[]string{"v0", "v1", "v2", "aborted", "other"}[rng.IntN(5)], int64(1 + rng.IntN(4))}
		case r < 83:
			op = []any{"read", ts, lock(), []string{"k", "j"}[rng.IntN(2)]}
		case r < 90:
			op = genRepeat(rng, ts, nClients, nLocks)
		default:
			op = mutate(rng, []any{"acquire", ts, client(), lock(), ttl(), "shared"})
		}
		ops = append(ops, op)
	}
	return ops
}

// genRepeat makes a repeat drive over the same small pools, in either
// argument order, sometimes malformed.
func genRepeat(rng *rand.Rand, ts int64, nClients, nLocks int) []any {
	c := fmt.Sprintf("{i%%%d}", nClients)
	var tmpl []any
	switch rng.IntN(6) {
	case 5:
		tmpl = []any{"read", "L", []string{"k", "j"}[rng.IntN(2)]}
	case 0:
		tmpl = []any{"acquire", "c" + c, "L{i+1%" + strconv.Itoa(nLocks) + "}", int64(1 + rng.IntN(10))}
	case 1:
		tmpl = []any{"acquire", "c" + c, "L", int64(1 + rng.IntN(10)), "shared"}
	case 2:
		tmpl = []any{"release", "c" + c, "L"}
	case 3:
		tmpl = []any{"write", "L", "k{i%2}", "v{i}", int64(1 + rng.IntN(3))}
	default:
		tmpl = []any{[]string{"status", "inspect", "read", "renew"}[rng.IntN(4)], "c" + c, "L", int64(3)}
	}
	count := any(int64(1 + rng.IntN(8)))
	step := any(int64(rng.IntN(3)))
	switch rng.IntN(25) {
	case 0:
		count = int64(0)
	case 1:
		step = int64(-1)
	case 2:
		tmpl = []any{"repeat", "x"}
	case 3:
		tmpl[1] = "c{i%0}"
	}
	if rng.IntN(2) == 0 {
		return []any{"repeat", ts, count, step, tmpl}
	}
	return []any{"repeat", ts, tmpl, count, step}
}

// mutate breaks a well-formed operation in one of the ways rules 1-8 catch.
func mutate(rng *rand.Rand, op []any) any {
	switch rng.IntN(12) {
	case 0:
		return "acquire"
	case 1:
		return []any{}
	case 2:
		op[0] = "Acquire"
	case 3:
		op[1] = json.Number("1.5")
	case 4:
		op[1] = true
	case 5:
		return op[:2+rng.IntN(2)]
	case 6:
		op[2] = ""
	case 7:
		op[3] = int64(7)
	case 8:
		op[5] = "Shared"
		op[4] = int64(0) // a type error outranks the range error
	case 9:
		op = append(op, "extra")
	case 10:
		op[4] = json.Number("1e3")
	default:
		op[5] = nil
	}
	return op
}
