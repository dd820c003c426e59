// Package bare tells whether this binary was built for the benchmark that
// prices the features beyond the contract (docs/performance.md, "What the
// history costs"): with the build tag lkbare, the grant history is not
// written, grants carry no predecessors, events are not numbered, and the
// audit log is not written. It is a build tag, never a flag, so that no
// server a user runs can lose them; the normal binary holds no trace of
// the switch (the constant is false and the compiler drops its branches).
package bare
