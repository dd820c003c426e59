package harness

import lk "github.com/leasekeeper/leasekeeper"

// The JSON shapes of SPEC.md section 1, built from the engine's answers.

func acquireResult(r lk.AcquireResult) []any {
	var out []any
	switch r.Outcome {
	case lk.Granted:
		out = []any{"granted", r.Token, r.ExpiresAt}
	case lk.Queued:
		out = []any{"queued", r.Position}
	case lk.Deadlock:
		return []any{"deadlock", victims(r.Victims)}
	}
	if len(r.Victims) > 0 {
		out = append(out, victims(r.Victims))
	}
	return out
}

func victims(vs []string) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

func inspectResult(in lk.Inspection) map[string]any {
	holders := make([]any, len(in.Holders))
	for i, h := range in.Holders {
		holders[i] = []any{h.Client, string(h.Mode), h.Token, h.ExpiresAt}
	}
	queue := make([]any, len(in.Queue))
	for i, w := range in.Queue {
		queue[i] = []any{w.Client, string(w.Mode)}
	}
	return map[string]any{"holders": holders, "queue": queue}
}

func statusResult(st lk.ClientStatus) map[string]any {
	holds := make([]any, len(st.Holds))
	for i, h := range st.Holds {
		holds[i] = []any{h.Lock, string(h.Mode), h.Token, h.ExpiresAt}
	}
	out := map[string]any{"age": nil, "holds": holds, "waiting": nil}
	if st.Age != 0 {
		out["age"] = st.Age
	}
	if st.Waiting != "" {
		out["waiting"] = st.Waiting
	}
	return out
}
