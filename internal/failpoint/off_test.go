//go:build !failpoints

package failpoint

import (
	"strings"
	"testing"
)

// TestOffWithoutTag: without the build tag no failpoint is ever on, whatever
// the environment says.
func TestOffWithoutTag(t *testing.T) {
	t.Setenv(EnvVar, strings.Join(All, ","))
	for _, name := range All {
		if Enabled(name) || First(name, "k") {
			t.Errorf("failpoint %s is on in a build without the tag", name)
		}
	}
	if Compiled {
		t.Error("Compiled is true without the tag")
	}
}
