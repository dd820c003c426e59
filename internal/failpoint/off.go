//go:build !failpoints

package failpoint

// Compiled reports whether this binary was built with failpoints.
const Compiled = false

// Enabled reports whether the failpoint name is on: never, without the
// build tag.
func Enabled(name string) bool { return false }

// First reports whether the failpoint name is on and this is the first
// time this process asks about key: never, without the build tag.
func First(name, key string) bool { return false }
