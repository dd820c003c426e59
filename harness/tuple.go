package harness

import lk "github.com/leasekeeper/leasekeeper"

// Tuple encodes a typed result of package leasekeeper as the contract's
// result (docs/contract.md section 1): ["granted", token, expires_at],
// "released", {"holders": [...], "queue": [...]}, ... This is the one place
// the contract's tuples are built. It panics on a type that is no result.
func Tuple(res any) any {
	switch r := res.(type) {
	case lk.AcquireResult:
		var out []any
		switch r.Outcome {
		case lk.Granted:
			out = []any{"granted", r.Token, r.ExpiresAt}
		case lk.Queued:
			out = []any{"queued", r.Position}
		case lk.Deadlock:
			return []any{"deadlock", anys(r.Victims)}
		default: // withdrawn: only a blocked acquire of the HTTP API answers it
			return string(r.Outcome)
		}
		if len(r.Victims) > 0 {
			out = append(out, anys(r.Victims))
		}
		return out
	case lk.RenewResult:
		return []any{"renewed", r.Token, r.ExpiresAt}
	case lk.ReleaseResult:
		return string(r.Outcome)
	case lk.WriteResult:
		return string(r.Outcome)
	case lk.ReadResult:
		if r.Value == nil {
			return nil
		}
		return *r.Value
	case lk.InspectResult:
		holders := make([]any, len(r.Holders))
		for i, h := range r.Holders {
			holders[i] = []any{h.Client, string(h.Mode), h.Token, h.ExpiresAt}
		}
		queue := make([]any, len(r.Queue))
		for i, w := range r.Queue {
			queue[i] = []any{w.Client, string(w.Mode)}
		}
		return map[string]any{"holders": holders, "queue": queue}
	case lk.StatusResult:
		holds := make([]any, len(r.Holds))
		for i, h := range r.Holds {
			holds[i] = []any{h.Lock, string(h.Mode), h.Token, h.ExpiresAt}
		}
		out := map[string]any{"age": nil, "holds": holds, "waiting": nil}
		if r.Age != 0 {
			out["age"] = r.Age
		}
		if r.Waiting != nil {
			out["waiting"] = r.Waiting.Lock
		}
		return out
	}
	panic("harness: no tuple for a result of this type")
}

func anys(vs []string) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
