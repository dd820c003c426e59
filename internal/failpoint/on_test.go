//go:build failpoints

package failpoint

import (
	"maps"
	"slices"
	"testing"
)

// TestParse: the variable is a list of names separated by commas, spaces
// around them ignored.
func TestParse(t *testing.T) {
	got := slices.Sorted(maps.Keys(parse(" reissue-token,, accept-stale-write ")))
	if want := []string{"accept-stale-write", "reissue-token"}; !slices.Equal(got, want) {
		t.Errorf("parse: %v, want %v", got, want)
	}
	if len(parse("")) != 0 {
		t.Error("parse of the empty string enables something")
	}
}

// TestFirst: First is true once per key, and only for an enabled failpoint.
func TestFirst(t *testing.T) {
	saved := enabled
	defer func() { enabled = saved }()
	enabled = parse(ReissueToken)
	if !Enabled(ReissueToken) || Enabled(AcceptStaleWrite) {
		t.Fatalf("Enabled does not follow the set: %v", enabled)
	}
	if !First(ReissueToken, "a") || First(ReissueToken, "a") || !First(ReissueToken, "b") {
		t.Error("First is not true exactly once per key")
	}
	if First(AcceptStaleWrite, "a") {
		t.Error("First is true for a failpoint that is off")
	}
}
