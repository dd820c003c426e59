// Package model is the porcupine model of the API (docs/robustness.md, The
// model), one lock at a time: its holders with their tokens, its queue, its
// fencing counter and its part of the fenced store; and Operations, which
// turns a recorded history into porcupine's operations.
//
// It is a model of lapse-free workloads: no lease ends but by a release,
// so the model needs no clock (a lapse is a move of time that no operation
// shows, which porcupine cannot place). Workloads keep ttl far beyond
// their length; the invariant checks (package validate) check what time
// must respect, lapses included, from the server's own times.
//
// Locks are independent in the API but for two things, "client busy" (a
// client waits for one lock at a time) and deadlocks (a cycle through
// several locks). A workload in which each client id uses a single lock
// (traffic.Workload does: "w3/lock-1") has neither, so the history
// partitions by lock and each lock is checked alone, which keeps the
// search small.
//
// An answered operation has one next state. A blocked acquire answered
// "granted" took effect at two instants, its enqueue and its grant at a
// release; porcupine places an operation at one. The model places it at
// the enqueue, noting the token the client was told, and the release that
// hands the lock over must give that very token; any later operation of
// the same client finds the hand-over done. An operation whose outcome is
// unknown has two next states: it took effect, or it never did (Model).
//
// This model stays apart from internal/model, the contract's reference
// model, which is its oracle (TestModelAgainstReference): the reference has
// a clock and mutable state, which porcupine's search, that steps the same
// state many ways, cannot use.
package model

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// modelHolder is one lease on the lock.
type modelHolder struct {
	client string
	mode   lk.Mode
	token  int64
}

// modelWaiter is one queue entry. expect is the token its acquire was
// answered with (0 when unknown: the answer has not come, or never will),
// and by when that answer came.
type modelWaiter struct {
	client string
	mode   lk.Mode
	expect int64
	by     int64
}

// modelValue is one key of the fenced store.
type modelValue struct {
	key, value string
	token      int64
}

// lockState is the model's state of one lock. It is never changed in
// place: a step copies what it changes.
type lockState struct {
	holders []modelHolder // by token
	queue   []modelWaiter // oldest first
	counter int64         // the last token issued
	highest int64         // the highest token the store accepted
	values  []modelValue  // by key
}

// stepInput is what the model steps on: the operation and its times.
type stepInput struct {
	in           history.Input
	call, answer int64 // answer: the return, for a known outcome
}

func (s lockState) holderOf(client string) int {
	return slices.IndexFunc(s.holders, func(h modelHolder) bool { return h.client == client })
}

func (s lockState) waiterOf(client string) int {
	return slices.IndexFunc(s.queue, func(w modelWaiter) bool { return w.client == client })
}

// compatible is S1: no holders, or only shared ones and a shared request.
func (s lockState) compatible(mode lk.Mode) bool {
	if len(s.holders) == 0 {
		return true
	}
	if mode != lk.Shared {
		return false
	}
	for _, h := range s.holders {
		if h.mode != lk.Shared {
			return false
		}
	}
	return true
}

// grantQueue is S3: while the head of the queue is compatible, grant it
// the next token. ok is false when a waiter was told another token.
func (s lockState) grantQueue() (lockState, bool) {
	for len(s.queue) > 0 && s.compatible(s.queue[0].mode) {
		w := s.queue[0]
		s.queue = s.queue[1:]
		s.counter++
		if w.expect != 0 && w.expect != s.counter {
			return s, false
		}
		s.holders = append(slices.Clip(s.holders), modelHolder{client: w.client, mode: w.mode, token: s.counter})
	}
	return s, true
}

// step is the model's step function for one lock.
func step(s lockState, si stepInput, out history.Output) (bool, lockState) {
	in := si.in
	// A client's operation sent after its acquire was answered finds the
	// grant made.
	if i := s.waiterOf(in.Client); i >= 0 && s.queue[i].expect != 0 && si.call > s.queue[i].by {
		return false, s
	}
	known := !out.Unknown
	refused := func(code lk.ErrorCode) (bool, lockState) {
		return !known || (out.Err == code && out.Outcome == ""), s
	}
	if known && out.Err != "" && out.Outcome != "" {
		return false, s
	}
	switch in.Kind {
	case history.Acquire:
		if s.holderOf(in.Client) >= 0 || s.waiterOf(in.Client) >= 0 {
			return refused(lk.CodeClientBusy)
		}
		if len(s.queue) == 0 && s.compatible(in.Mode) {
			token := s.counter + 1
			if known && (out.Outcome != lk.Granted || out.Token != token) {
				return false, s
			}
			s.counter = token
			s.holders = append(slices.Clip(s.holders), modelHolder{client: in.Client, mode: in.Mode, token: token})
			return true, s
		}
		w := modelWaiter{client: in.Client, mode: in.Mode}
		switch {
		case !known:
		case out.Outcome == lk.Queued && in.Wait == 0:
			// Answered at once: its rank then.
			if out.Position != int64(len(s.queue))+1 {
				return false, s
			}
		case out.Outcome == lk.Queued:
			// Answered when the wait ran out: its rank then, which the
			// waiters ahead leaving may have lowered.
			if out.Position < 1 || out.Position > int64(len(s.queue))+1 {
				return false, s
			}
		case out.Outcome == lk.Granted && in.Wait > 0:
			if out.Token <= s.counter {
				return false, s
			}
			// The queue is granted in its order (grantQueue): a waiter
			// told a lower token cannot be behind one told a higher. Cut
			// here, the orders of concurrent waiters that some hand-over
			// would refuse later are not searched at all.
			for _, q := range s.queue {
				if q.expect > out.Token {
					return false, s
				}
			}
			w.expect, w.by = out.Token, si.answer
		default:
			return false, s
		}
		s.queue = append(slices.Clip(s.queue), w)
		return true, s

	case history.Release:
		var want lk.Outcome
		if i := s.holderOf(in.Client); i >= 0 {
			s.holders = slices.Delete(slices.Clone(s.holders), i, i+1)
			want = lk.Released
		} else if i := s.waiterOf(in.Client); i >= 0 {
			s.queue = slices.Delete(slices.Clone(s.queue), i, i+1)
			want = lk.Withdrawn
		} else {
			return refused(lk.CodeNotHolder)
		}
		if known && out.Outcome != want {
			return false, s
		}
		s, ok := s.grantQueue()
		return ok, s

	case history.Renew:
		i := s.holderOf(in.Client)
		if i < 0 {
			return refused(lk.CodeNotHolder)
		}
		return !known || (out.Outcome == lk.Renewed && out.Token == s.holders[i].token), s

	case history.Write:
		if in.Token < s.highest {
			return refused(lk.CodeStaleToken)
		}
		if known && out.Outcome != lk.OK {
			return false, s
		}
		s.highest = in.Token
		v := modelValue{key: in.Key, value: in.Value, token: in.Token}
		i, found := slices.BinarySearchFunc(s.values, in.Key, func(v modelValue, k string) int { return cmp.Compare(v.key, k) })
		s.values = slices.Clone(s.values)
		if found {
			s.values[i] = v
		} else {
			s.values = slices.Insert(s.values, i, v)
		}
		return true, s

	case history.Read:
		if !known {
			return true, s
		}
		if out.Err != "" {
			return false, s
		}
		i, found := slices.BinarySearchFunc(s.values, in.Key, func(v modelValue, k string) int { return cmp.Compare(v.key, k) })
		if !found {
			return out.Value == nil, s
		}
		return out.Value != nil && *out.Value == s.values[i].value && out.Token == s.values[i].token, s
	}
	return false, s
}

func (s lockState) equal(o lockState) bool {
	return s.counter == o.counter && s.highest == o.highest &&
		slices.Equal(s.holders, o.holders) && slices.Equal(s.queue, o.queue) && slices.Equal(s.values, o.values)
}

func (s lockState) hash() uint64 {
	h := fnv.New64a()
	fmt.Fprint(h, s.counter, s.highest)
	for _, x := range s.holders {
		fmt.Fprint(h, "h", x.client, x.mode, x.token)
	}
	for _, x := range s.queue {
		fmt.Fprint(h, "q", x.client, x.mode, x.expect, x.by)
	}
	for _, x := range s.values {
		fmt.Fprint(h, "v", x.key, x.value, x.token)
	}
	return h.Sum64()
}

func (s lockState) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "counter %d, holders [", s.counter)
	for i, x := range s.holders {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s %d", x.client, x.mode, x.token)
	}
	b.WriteString("], queue [")
	for i, x := range s.queue {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", x.client, x.mode)
		if x.expect != 0 {
			fmt.Fprintf(&b, " (told %d)", x.expect)
		}
	}
	fmt.Fprintf(&b, "], store highest %d", s.highest)
	for _, v := range s.values {
		fmt.Fprintf(&b, ", %s=%q@%d", v.key, v.value, v.token)
	}
	return b.String()
}

// Model is the porcupine model of the API for lapse-free workloads,
// partitioned by lock. An operation with an unknown outcome steps to two
// states, as if it took effect and as if it never did: Operations bounds
// the return of some of them (a process killed), and one that never took
// effect must still be placed somewhere before that bound.
var Model = nondeterministic.ToModel()

var nondeterministic = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byLock := map[string][]porcupine.Operation{}
		var locks []string
		for _, op := range history {
			l := op.Input.(stepInput).in.Lock
			if _, ok := byLock[l]; !ok {
				locks = append(locks, l)
			}
			byLock[l] = append(byLock[l], op)
		}
		slices.Sort(locks)
		var out [][]porcupine.Operation
		for _, l := range locks {
			out = append(out, byLock[l])
		}
		return out
	},
	Init: func() []any { return []any{lockState{}} },
	Step: func(state, input, output any) []any {
		s, out := state.(lockState), output.(history.Output)
		ok, next := step(s, input.(stepInput), out)
		switch {
		case !ok:
			return nil
		case out.Unknown && !next.equal(s):
			return []any{next, s}
		}
		return []any{next}
	},
	Equal: func(a, b any) bool { return a.(lockState).equal(b.(lockState)) },
	Hash:  func(s any) uint64 { return s.(lockState).hash() },
	DescribeOperation: func(input, output any) string {
		si := input.(stepInput)
		return describe(history.Op{Input: si.in, Output: output.(history.Output)})
	},
	DescribeState: func(s any) string { return s.(lockState).String() },
}

// describe is an operation without its times, for porcupine's pictures.
func describe(op history.Op) string {
	s := op.String()
	if i := strings.Index(s, " ["); i >= 0 {
		s = s[:i]
	}
	return strings.TrimPrefix(s, "#0 ")
}
