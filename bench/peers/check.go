package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// hold is one client's hold of a name as that client saw it: from the
// instant it read the grant to the instant it was about to send the
// release. A correct lock service grants the name to the next client only
// after it has the release, so for each name these intervals never overlap
// (the clock is the machine's monotonic one, shared by every client).
type hold struct {
	name     string
	client   int
	from, to time.Time
	token    int64 // leasekeeper's fencing token; etcd: the mutex key's create revision
}

// maxReported bounds the violations check describes one by one.
const maxReported = 10

// check returns what the holds show to be wrong, and nil if nothing:
//   - two holds of one name that overlap (two clients held it at once);
//   - a hold whose token is not above the token of the hold of the same
//     name before it (a fencing token reissued or going backwards).
//
// Holds are ordered per name by their start, which is the grant order when
// none overlap.
func check(holds []hold) []string {
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b hold) int {
		return cmp.Or(cmp.Compare(a.name, b.name), a.from.Compare(b.from), a.to.Compare(b.to))
	})
	var out []string
	found := 0
	report := func(format string, args ...any) {
		found++
		if found <= maxReported {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	// latest is the hold of the current name that ends last so far: a hold
	// may overlap one that began well before its predecessor.
	var prev, latest *hold
	for i := range sorted {
		h := &sorted[i]
		if prev == nil || prev.name != h.name {
			prev, latest = h, h
			continue
		}
		if h.from.Before(latest.to) {
			end := latest.to
			if h.to.Before(end) {
				end = h.to
			}
			report("%q held by client %d (token %d) and by client %d (token %d) at once, for %v",
				h.name, latest.client, latest.token, h.client, h.token, end.Sub(h.from))
		}
		if h.token <= prev.token {
			report("%q: token %d granted to client %d after token %d to client %d",
				h.name, h.token, h.client, prev.token, prev.client)
		}
		if h.to.After(latest.to) {
			latest = h
		}
		prev = h
	}
	if found > maxReported {
		out = append(out, fmt.Sprintf("and %d more", found-maxReported))
	}
	return out
}
