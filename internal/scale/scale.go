// Package scale builds the scale scenarios of docs/contract.md section 6 (issue
// "Scale"): operation lists, mostly repeat drives, at a chosen size. The
// committed files under testdata/scale are these scenarios at full size;
// `leasekeeper bench` runs them.
package scale

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/leasekeeper/leasekeeper/harness"
)

// Scenario is a named operation list. Setup, when present, runs first and is
// not part of what a benchmark times (scenario 6's history).
type Scenario struct {
	Name  string
	About string
	Setup []any
	Ops   []any
}

// All returns every scenario at size f (1 = full size; 0.25 and 0.5 are what
// the linearity measurements use).
func All(f float64) []Scenario {
	n := func(full int) int { return max(1, int(math.Round(float64(full)*f))) }
	all := []Scenario{
		ManyLocks(n(3000)),
		LongQueue(n(800)),
		SharedCrowd(n(2000)),
		DeadlockRing(n(600), n(1500), 0),
		DeadlockRing(n(600), n(1500), n(10000)),
		LapseChains(n(3000)),
		History(n(10000), 100),
		History(n(10000), n(10000)),
		OneClient(n(20000), n(3000)),
	}
	for i := range all {
		all[i].Setup, all[i].Ops = decoded(all[i].Setup), decoded(all[i].Ops)
	}
	return all
}

// decoded turns ops into what harness.Decode makes of their JSON (numbers as
// json.Number), the form every engine is fed.
func decoded(ops []any) []any {
	if len(ops) == 0 {
		return nil
	}
	b, err := json.Marshal(ops)
	if err != nil {
		panic(err)
	}
	in, err := harness.Decode(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	return in.Ops
}

func op(name string, ts int64, args ...any) []any {
	return append([]any{name, ts}, args...)
}

func rep(ts int64, count, step int, tmpl ...any) []any {
	return []any{"repeat", ts, tmpl, count, step}
}

// workload is scenario 1's drive over `locks` locks and 2*locks clients, from
// ts t: acquires (half granted, half queued), renews, fenced writes,
// inspects, releases that hand each lock over, writes by the successors,
// status, and the successors' releases. prefix keeps its names apart from
// other scenarios' rows.
func workload(t int64, locks int, prefix string) []any {
	return workloadHeldBy(t, locks, prefix, "")
}

// workloadHeldBy is workload with holder, when not "", as the first holder
// of every lock in place of a client per lock: the same operations in the
// same order, with the same results but for the holder's name.
func workloadHeldBy(t int64, locks int, prefix, holder string) []any {
	l := fmt.Sprintf("%sL{i%%%d}", prefix, locks)
	succ := fmt.Sprintf("%sjob{i+%d}", prefix, locks)
	job := prefix + "job{i}"
	acquires := []any{rep(t+0, 2*locks, 0, "acquire", job, l, 300)}
	if holder != "" {
		job = holder
		acquires = []any{rep(t+0, locks, 0, "acquire", holder, l, 300), rep(t+0, locks, 0, "acquire", succ, l, 300)}
	}
	return append(acquires,
		rep(t+1, locks, 0, "renew", job, l, 300),
		rep(t+2, locks, 0, "write", l, "part{i%5}", "rows {i}", 1),
		rep(t+3, 2*locks/3, 0, "inspect", l),
		rep(t+4, locks, 0, "release", job, l),
		rep(t+5, locks, 0, "write", l, "part{i%5}", "rows {i} again", 2),
		rep(t+6, locks/3, 0, "status", succ),
		rep(t+7, locks, 0, "release", succ, l),
		rep(t+8, locks/3, 0, "read", l, "part{i%5}"),
	)
}

// ManyLocks is scenario 1: thousands of locks and clients acquiring,
// renewing, writing, releasing and inspecting.
func ManyLocks(locks int) Scenario {
	return Scenario{Name: "1-many-locks", About: fmt.Sprintf("%d locks, %d clients", locks, 2*locks),
		Ops: workload(0, locks, "")}
}

// LongQueue is scenario 2: one lock with a queue of n waiters, withdrawals
// from the middle, an idle gap after which the whole chain lapses inside one
// operation, then a second queue that drains one release per second.
func LongQueue(n int) Scenario {
	ops := []any{
		op("acquire", 0, "holder", "Q", 100),
		rep(1, n, 0, "acquire", "w{i}", "Q", 10),
		rep(2, n, 0, "renew", "w{i}", "Q", 10), // waiters are not holders
		rep(3, n/4, 0, "release", fmt.Sprintf("w{i+%d}", n/4), "Q"),
		op("inspect", 4, "Q"),
		rep(5, n, 0, "status", "w{i}"),
	}
	// Everyone left is granted and lapses back to back, 10 s each, long
	// before the next operation: one operation retires the whole chain.
	idle := int64(100 + 10*n + 1000)
	ops = append(ops,
		op("status", idle, "holder"),
		op("inspect", idle, "Q"),
		op("acquire", idle+1, "holder2", "Q", 86400),
		rep(idle+2, n, 0, "acquire", "v{i}", "Q", 86400),
		rep(idle+3, n, 0, "status", "v{i}"),
		op("release", idle+3, "holder2", "Q"),
		rep(idle+4, n, 1, "write", "Q", "out", "by v{i}", 1),
	)
	// One release per second; each hands the lock to the next waiter.
	t := idle + 4 + int64(n)
	ops = append(ops,
		rep(t, n, 1, "release", "v{i}", "Q"),
		rep(t+int64(n), n, 0, "status", "v{i}"),
		op("inspect", t+int64(n), "Q"),
	)
	return Scenario{Name: "2-long-queue", About: fmt.Sprintf("queue of %d", n), Ops: ops}
}

// SharedCrowd is scenario 3: n shared holders, a writer queued behind them, n
// more readers behind the writer; renews of half the readers, releases of the
// other half, inspects as the readers lapse and the writer gets in.
func SharedCrowd(n int) Scenario {
	half := n / 2
	ops := []any{
		rep(0, n, 0, "acquire", "r{i}", "S", 100, "shared"),
		op("acquire", 1, "writer", "S", 50),
		rep(2, n, 0, "acquire", "q{i}", "S", 100, "shared"),
		rep(3, half, 0, "renew", "r{i}", "S", 200),
		rep(4, n-half, 0, "release", fmt.Sprintf("r{i+%d}", half), "S"),
		op("inspect", 5, "S"),
		rep(6, n, 0, "status", "r{i}"),
		op("inspect", 150, "S"),
		op("inspect", 203, "S"), // the renewed readers lapsed at 203: the writer is in
		op("status", 204, "writer"),
		op("inspect", 253, "S"), // the writer lapsed at 253: the queued readers are in
		rep(254, n, 0, "renew", "q{i}", "S", 100),
		rep(255, n, 0, "release", "q{i}", "S"),
		op("inspect", 256, "S"),
	}
	return Scenario{Name: "3-shared-crowd", About: fmt.Sprintf("%d readers, a writer, %d readers", n, n), Ops: ops}
}

// DeadlockRing is scenario 4: a ring of `ring` clients, each holding one lock
// and waiting for the next, closed by the last; then `pairs` independent
// two-client deadlocks. With noise > 0, that many unrelated waiters are
// queued elsewhere first (10 per lock), to show that the deadlock check does
// not depend on them.
func DeadlockRing(ring, pairs, noise int) Scenario {
	var setup, ops []any
	name, about := "4-deadlocks", fmt.Sprintf("ring of %d, %d pairs", ring, pairs)
	if noise > 0 {
		locks := max(1, noise/10)
		setup = []any{
			rep(0, locks, 0, "acquire", "nh{i}", "noise{i}", 86400),
			rep(0, noise, 0, "acquire", "nw{i}", fmt.Sprintf("noise{i%%%d}", locks), 86400)}
		name, about = "4-deadlocks-noise", about+fmt.Sprintf(", after %d unrelated waiters", noise)
	}
	ops = append(ops,
		rep(1, ring, 0, "acquire", "k{i}", "R{i}", 86400),
		rep(2, ring-1, 0, "acquire", "k{i}", "R{i+1}", 86400),
		op("acquire", 3, fmt.Sprintf("k%d", ring-1), "R0", 86400),
		op("inspect", 3, "R0"),
		rep(4, pairs, 0, "acquire", "a{i}", "X{i}", 86400),
		rep(4, pairs, 0, "acquire", "b{i}", "Y{i}", 86400),
		rep(5, pairs, 0, "acquire", "a{i}", "Y{i}", 86400),
		rep(6, pairs, 0, "acquire", "b{i}", "X{i}", 86400),
		rep(7, pairs, 0, "status", "a{i}"),
	)
	return Scenario{Name: name, About: about, Setup: setup, Ops: ops}
}

// LapseChains is scenario 5: n locks each with a chain of four leases
// (exclusive, shared, shared, exclusive) that lapse back to back, all inside
// one later operation.
func LapseChains(n int) Scenario {
	ops := []any{
		rep(0, n, 0, "acquire", "e1-{i}", "C{i}", 10),
		rep(1, n, 0, "acquire", "s1-{i}", "C{i}", 10, "shared"),
		rep(2, n, 0, "acquire", "s2-{i}", "C{i}", 10, "shared"),
		rep(3, n, 0, "acquire", "e2-{i}", "C{i}", 10),
		op("inspect", 100, "C0"),
		rep(101, n, 0, "inspect", "C{i}"),
		rep(102, n, 0, "acquire", "e3-{i}", "C{i}", 10),
		rep(103, n, 0, "write", "C{i}", "k", "v", 5),
	}
	return Scenario{Name: "5-lapse-chains", About: fmt.Sprintf("%d locks x 4 leases", n), Ops: ops}
}

// History is scenario 6: scenario 1's workload (3000 locks) after `leases`
// lapsed leases and store rows spread over `locks` locks.
func History(leases, locks int) Scenario {
	h := fmt.Sprintf("H{i%%%d}", locks)
	setup := []any{
		rep(0, leases, 0, "acquire", "old{i}", h, 5),
		rep(1, leases, 0, "write", h, "key{i}", "old value {i}", 1),
		op("status", 1_000_000, "old0"), // every old lease has lapsed by now
	}
	return Scenario{Name: fmt.Sprintf("6-history-%d-locks", locks),
		About: fmt.Sprintf("workload after %d lapsed leases over %d locks", leases, locks),
		Setup: setup, Ops: workload(1_000_001, 3000, "")}
}

// OneClient is scenario 7: one client holding tens of thousands of locks.
// "big" takes `held` locks (setup) and keeps them throughout, then runs
// scenario 1's workload over `locks` locks as the first holder of every one
// of them: its acquires, renews and releases, the successors' queued
// acquires, the hand-overs, writes, inspects and status. Each operation
// should cost what the same operation costs in scenario 1, where every
// holder is a client of its own: nothing an operation does may read the
// holder's other leases.
func OneClient(held, locks int) Scenario {
	setup := []any{rep(0, held, 0, "acquire", "big", "B{i}", 86400)}
	return Scenario{Name: "7-one-client-many-locks",
		About: fmt.Sprintf("scenario 1's workload (%d locks) with one client holding all of them and %d more", locks, held),
		Setup: setup, Ops: workloadHeldBy(1, locks, "", "big")}
}

// Count returns how many operations ops runs, counting each repeat's runs.
func Count(ops []any) int {
	total := 0
	for _, o := range ops {
		a := o.([]any)
		if a[0] == "repeat" {
			n, _ := a[3].(json.Number).Int64()
			total += int(n)
			continue
		}
		total++
	}
	return total
}

// JSON renders a scenario as a `leasekeeper run` input: setup and ops in one
// array, one operation per line.
func (s Scenario) JSON() []byte {
	out := []byte("[")
	for i, o := range append(append([]any{}, s.Setup...), s.Ops...) {
		if i > 0 {
			out = append(out, ',')
		}
		b, _ := json.Marshal(o)
		out = append(out, '\n')
		out = append(out, b...)
	}
	return append(out, "\n]\n"...)
}
