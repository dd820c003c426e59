//go:build !lkbare

package bare

// Build is true in a binary built with the tag lkbare.
const Build = false
