package server

import (
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
)

// page reads a page's limit (1 to lk.MaxLocksLimit, lk.DefaultLocksLimit
// when absent) and after ("" when absent): of the locks listing and of
// status's holds.
func (f *fields) page() (limit int, after string) {
	n := f.integer("limit", false, lk.DefaultLocksLimit)
	if f.bad == nil && (n < 1 || n > lk.MaxLocksLimit) {
		f.fail(lk.CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d, got %d", lk.MaxLocksLimit, n))
		n = lk.DefaultLocksLimit
	}
	if _, ok := f.get("after"); ok {
		after = f.name("after")
	}
	return int(n), after
}
