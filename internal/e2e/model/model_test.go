package model

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
	reference "github.com/leasekeeper/leasekeeper/internal/model"
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
		ref := reference.New()
		var s lockState
		written := map[string]int64{} // key -> token of the value the reference keeps
		lastGrant := int64(0)
		for i := range 60 {
			c := clients[rng.IntN(len(clients))]
			key := fmt.Sprintf("k%d", rng.IntN(2))
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
