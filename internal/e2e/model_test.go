package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	"github.com/leasekeeper/leasekeeper/internal/model"
)

// asOutput turns a result of the reference model (internal/model), as
// JSON, into the Output the HTTP API answers for it. readToken is the token
// of the write a read's value came from (the contract's read answers the
// value alone).
func asOutput(t *testing.T, kind history.Kind, result any, readToken int64) history.Output {
	t.Helper()
	b, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	switch r := v.(type) {
	case nil:
		return history.Output{}
	case string:
		if code, ok := strings.CutPrefix(r, "error: "); ok {
			return history.Output{Err: lk.ErrorCode(strings.ReplaceAll(code, " ", "_"))}
		}
		if kind == history.Read {
			return history.Output{Value: &r, Token: readToken}
		}
		return history.Output{Outcome: lk.Outcome(r)}
	case []any:
		o := history.Output{Outcome: lk.Outcome(r[0].(string))}
		switch o.Outcome {
		case lk.Granted, lk.Renewed:
			o.Token = int64(r[1].(float64))
			o.ExpiresAt = int64(r[2].(float64))
		case lk.Queued:
			o.Position = int64(r[1].(float64))
		}
		return o
	}
	t.Fatalf("unexpected result %s", b)
	return history.Output{}
}

// TestModelAgainstReference: the porcupine model agrees with the
// contract's reference model, internal/model, on random sequences of
// operations on one lock in which nothing lapses: every result of the
// reference is a step the model takes, and a result with another token,
// outcome or value is one it refuses.
func TestModelAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	clients := []string{"a", "b", "c", "d"}
	for round := range 200 {
		ref := model.New()
		var s lockState
		written := map[string]int64{} // key -> token of the value the reference keeps
		lastGrant := int64(0)
		for i := range 60 {
			c := clients[rng.IntN(len(clients))]
			key := KeyName(rng.IntN(2))
			var in history.Input
			var op []any
			switch n := rng.IntN(10); {
			case n < 4:
				mode := lk.Exclusive
				if rng.IntN(3) == 0 {
					mode = lk.Shared
				}
				in = history.Input{Kind: history.Acquire, Client: c, Lock: "L", TTL: 1000, Mode: mode}
				op = []any{"acquire", 1, c, "L", 1000, string(mode)}
			case n < 7:
				in = history.Input{Kind: history.Release, Client: c, Lock: "L"}
				op = []any{"release", 1, c, "L"}
			case n < 8:
				in = history.Input{Kind: history.Renew, Client: c, Lock: "L", TTL: 1000}
				op = []any{"renew", 1, c, "L", 1000}
			case n < 9:
				token := max(1, lastGrant-int64(rng.IntN(3)))
				v := fmt.Sprintf("v%d-%d", round, i)
				in = history.Input{Kind: history.Write, Client: c, Lock: "L", Key: key, Value: v, Token: token}
				op = []any{"write", 1, "L", key, v, token}
			default:
				in = history.Input{Kind: history.Read, Client: c, Lock: "L", Key: key}
				op = []any{"read", 1, "L", key}
			}
			raw, _ := json.Marshal(op)
			out := asOutput(t, in.Kind, ref.Step(raw), written[key])
			if in.Kind == history.Write && out.Outcome == lk.OK {
				written[key] = in.Token
			}
			if out.Outcome == lk.Granted {
				lastGrant = out.Token
			}
			si := stepInput{in: in, call: int64(i), answer: int64(i)}
			// A wrong answer is refused.
			for _, bad := range wrongAnswers(out) {
				if ok, _ := step(s, si, bad); ok {
					t.Fatalf("round %d op %d: %s: the model accepts %v where the reference answers %v\nstate %v", round, i, raw, bad, out, s)
				}
			}
			ok, next := step(s, si, out)
			if !ok {
				t.Fatalf("round %d op %d: %s: the model refuses the reference's answer %v\nstate %v", round, i, raw, out, s)
			}
			// An unknown outcome of the same operation may take effect: the
			// same state.
			if ok, unk := step(s, si, history.Output{Unknown: true}); !ok || !unk.equal(next) {
				t.Fatalf("round %d op %d: %s as unknown: %v, state %v, want %v", round, i, raw, ok, unk, next)
			}
			s = next
		}
		// The holders and queue agree with the reference's inspect.
		raw, _ := json.Marshal([]any{"inspect", 1, "L"})
		b, _ := json.Marshal(ref.Step(raw))
		var got struct{ Holders, Queue [][]any }
		json.Unmarshal(b, &got)
		if len(got.Holders) != len(s.holders) || len(got.Queue) != len(s.queue) {
			t.Fatalf("round %d: the reference inspects %s; the model has %v", round, b, s)
		}
		for i, h := range got.Holders {
			if h[0] != s.holders[i].client || int64(h[2].(float64)) != s.holders[i].token {
				t.Fatalf("round %d: the reference inspects %s; the model has %v", round, b, s)
			}
		}
	}
}

// wrongAnswers are answers that differ from out in what the model judges.
func wrongAnswers(out history.Output) []history.Output {
	var bad []history.Output
	switch {
	case out.Err != "":
		bad = append(bad, history.Output{Outcome: lk.OK}, history.Output{Outcome: lk.Released}, history.Output{Outcome: lk.Granted, Token: 99})
	case out.Outcome == lk.Granted || out.Outcome == lk.Renewed:
		o := out
		o.Token++
		bad = append(bad, o, history.Output{Err: lk.CodeClientBusy}, history.Output{Err: lk.CodeNotHolder})
	case out.Outcome == lk.Queued:
		o := out
		o.Position++
		bad = append(bad, o, history.Output{Outcome: lk.Granted, Token: 99})
	case out.Outcome == lk.Released:
		bad = append(bad, history.Output{Outcome: lk.Withdrawn}, history.Output{Err: lk.CodeNotHolder})
	case out.Outcome == lk.Withdrawn:
		bad = append(bad, history.Output{Outcome: lk.Released}, history.Output{Err: lk.CodeNotHolder})
	case out.Outcome == lk.OK:
		bad = append(bad, history.Output{Err: lk.CodeStaleToken})
	case out.Value != nil:
		other := *out.Value + "x"
		bad = append(bad, history.Output{}, history.Output{Value: &other, Token: out.Token})
	default: // a read of null
		v := "x"
		bad = append(bad, history.Output{Value: &v, Token: 1})
	}
	return bad
}

// hist builds a history from operations given with their times in
// milliseconds.
type hist struct {
	h *history.History
}

func newHist() *hist { return &hist{h: history.New()} }

func (b *hist) op(call, ret int64, in history.Input, out history.Output) {
	b.h.Record(history.Op{Input: in, Output: out, Call: call * 1e6, Return: ret * 1e6})
}

func (b *hist) fault(at int64, kind string) {
	b.h.RecordFault(history.Fault{At: at * 1e6, Kind: kind})
}

// kill notes the kill of the process the operations went to (server 0,
// incarnation 0), whose effects had all appeared by settled.
func (b *hist) kill(at, settled int64) {
	b.h.RecordFault(history.Fault{At: at * 1e6, Kind: "kill", Settled: settled * 1e6})
}

func acq(client string, wait int64) history.Input {
	return history.Input{Kind: history.Acquire, Client: client, Lock: "L", TTL: 300, Mode: lk.Exclusive, Wait: wait}
}
func rel(client string) history.Input {
	return history.Input{Kind: history.Release, Client: client, Lock: "L"}
}
func wr(client, key, value string, token int64) history.Input {
	return history.Input{Kind: history.Write, Client: client, Lock: "L", Key: key, Value: value, Token: token}
}
func rd(key string, final bool) history.Input {
	return history.Input{Kind: history.Read, Client: "r", Lock: "L", Key: key, Final: final}
}
func grant(token int64) history.Output {
	now := time.Now().Unix()
	return history.Output{Outcome: lk.Granted, Token: token, GrantedAt: now, ExpiresAt: now + 300}
}
func said(o lk.Outcome) history.Output { return history.Output{Outcome: o} }
func value(v string, token int64) history.Output {
	return history.Output{Value: &v, Token: token}
}

var unknown = history.Output{Unknown: true, Detail: "connection reset"}

// verdict runs the invariant checks and porcupine on b's history.
func verdict(t *testing.T, b *hist) ([]string, porcupine.CheckResult) {
	t.Helper()
	var checks []string
	for _, v := range CheckInvariants(b.h) {
		if !slices.Contains(checks, v.Check) {
			checks = append(checks, v.Check)
		}
	}
	res, _ := CheckLinearizable(b.h, 10*time.Second)
	return checks, res
}

// TestChecksBite: hand-made histories of what a broken server would
// answer are reported by the checks meant for them, and the same
// histories done right, unknown outcomes included, pass.
func TestChecksBite(t *testing.T) {
	cases := []struct {
		name   string
		build  func(b *hist)
		checks []string // what the invariant checks report
		linear porcupine.CheckResult
	}{
		{"a hand-over", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 90, acq("b", 5), grant(2)) // blocked until a's release
			b.op(30, 40, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(50, 60, rel("a"), said(lk.Released))
			b.op(100, 110, wr("b", "k", "b1", 2), said(lk.OK))
			b.op(120, 130, wr("a", "k", "late", 1), history.Output{Err: lk.CodeStaleToken})
			b.op(140, 150, rd("k", true), value("b1", 2))
		}, nil, porcupine.Ok},
		{"unknown outcomes that happened, and one that did not", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 25, wr("a", "k", "a1", 1), unknown)
			b.fault(26, "kill")
			b.op(30, 35, rel("a"), unknown) // did not happen: a still holds
			b.op(40, 50, rel("a"), said(lk.Released))
			b.op(60, 70, acq("b", 0), unknown) // happened: b holds 2
			b.op(80, 90, acq("c", 0), history.Output{Outcome: lk.Queued, Position: 1})
			b.op(91, 95, acq("c", 0), history.Output{Err: lk.CodeClientBusy})
			b.op(100, 110, rel("b"), said(lk.Released)) // hands over to c: 3
			b.op(120, 130, rel("c"), said(lk.Released))
			b.op(140, 150, rd("k", true), value("a1", 1))
		}, nil, porcupine.Ok},
		{"an unknown release to a killed server that never happened", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 25, rel("a"), unknown)
			b.kill(26, 30)
			b.op(40, 50, acq("b", 0), history.Output{Outcome: lk.Queued, Position: 1})
		}, nil, porcupine.Ok},
		{"an unknown write to a killed server seen after it settled", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), unknown)
			b.kill(26, 30)
			b.op(40, 50, rd("k", false), history.Output{})
			b.op(60, 70, rd("k", true), value("a1", 1))
		}, nil, porcupine.Illegal},
		{"two exclusive holders", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 30, acq("b", 0), grant(2))
			b.op(40, 50, rel("a"), said(lk.Released))
			b.op(60, 70, rel("b"), said(lk.Released))
		}, []string{CheckExclusive}, porcupine.Illegal},
		{"a token reissued after a crash", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 30, rel("a"), said(lk.Released))
			b.fault(35, "kill")
			b.op(40, 50, acq("b", 0), grant(1))
		}, []string{CheckTokenUnique, CheckTokenCrash}, porcupine.Illegal},
		{"a blocked grant with a token skipped", func(b *hist) {
			b.op(0, 10, acq("a", 0), grant(1))
			b.op(20, 90, acq("b", 5), grant(3))
			b.op(50, 60, rel("a"), said(lk.Released))
			b.op(100, 110, rel("b"), said(lk.Released))
		}, nil, porcupine.Illegal},
		{"a stale write accepted", func(b *hist) {
			b.op(0, 10, wr("b", "k", "b1", 2), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a1", 1), said(lk.OK))
		}, []string{CheckFencing}, porcupine.Illegal},
		{"a write refused with no higher token", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), history.Output{Err: lk.CodeStaleToken})
		}, []string{CheckFalseStale}, porcupine.Illegal},
		{"an acknowledged write lost", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), said(lk.OK))
			b.fault(35, "kill")
			b.op(40, 50, rd("k", true), value("a1", 1))
		}, []string{CheckLostWrite}, porcupine.Illegal},
		{"a value nobody wrote", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(40, 50, rd("k", true), value("zz", 1))
		}, []string{CheckPhantomValue}, porcupine.Illegal},
		{"a read from the past, not final", func(b *hist) {
			b.op(0, 10, wr("a", "k", "a1", 1), said(lk.OK))
			b.op(20, 30, wr("a", "k", "a2", 1), said(lk.OK))
			b.op(40, 50, rd("k", false), value("a1", 1))
		}, nil, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newHist()
			c.build(b)
			checks, res := verdict(t, b)
			slices.Sort(checks)
			want := slices.Clone(c.checks)
			slices.Sort(want)
			if !slices.Equal(checks, want) {
				t.Errorf("invariant checks reported %v, want %v", checks, want)
			}
			if res != c.linear {
				t.Errorf("porcupine: %s, want %s", res, c.linear)
			}
		})
	}
}
