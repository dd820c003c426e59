//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// Compiled reports whether this binary was built with failpoints.
const Compiled = true

// enabled is the set of failpoints named in EnvVar, read once at start.
var enabled = parse(os.Getenv(EnvVar))

func parse(v string) map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
}

func init() {
	if len(enabled) == 0 {
		return
	}
	var names []string
	for name := range enabled {
		names = append(names, name)
	}
	// Said where the server's log goes, so that a reader of a failing
	// run's log knows the faults were planted.
	fmt.Fprintf(os.Stderr, "leasekeeper: failpoints enabled: %s\n", strings.Join(names, ","))
}

// Enabled reports whether the failpoint name is on in this process.
func Enabled(name string) bool { return enabled[name] }

var (
	firstMu sync.Mutex
	seen    = map[[2]string]bool{}
)

// First reports whether the failpoint name is on and this is the first
// time this process asks about key: for faults that strike once per key,
// such as once per lock after a restart.
func First(name, key string) bool {
	if !enabled[name] {
		return false
	}
	firstMu.Lock()
	defer firstMu.Unlock()
	k := [2]string{name, key}
	if seen[k] {
		return false
	}
	seen[k] = true
	return true
}
