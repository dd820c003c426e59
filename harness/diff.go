package harness

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Canonical re-encodes a JSON-ready value so that two results compare equal
// exactly when the contract says they are: numbers by value, object keys in
// any order.
func Canonical(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	err = dec.Decode(&out)
	return out, err
}

// Equal reports whether two results are the same under Canonical.
func Equal(a, b any) bool {
	ca, err1 := Canonical(a)
	cb, err2 := Canonical(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(ca, cb)
}

// Diff lists, one line per operation, where got differs from want; "" when
// they agree.
func Diff(ops, want, got []any) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "%d results, want %d\n", len(got), len(want))
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		if !Equal(want[i], got[i]) {
			op, _ := json.Marshal(ops[i])
			w, _ := json.Marshal(want[i])
			g, _ := json.Marshal(got[i])
			fmt.Fprintf(&b, "op %d %s\n  want %s\n  got  %s\n", i, op, w, g)
		}
	}
	return b.String()
}
