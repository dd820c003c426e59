//go:build !failpoints

package failpoint

import "time"

// ClockOffset is what ClockStepBack adds to the server's clock now:
// nothing, without the build tag.
func ClockOffset() time.Duration { return 0 }
