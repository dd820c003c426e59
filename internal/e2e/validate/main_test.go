package validate

import (
	"os"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
)

// TestMain removes the binary TestCheckAfterBites's server was built as.
func TestMain(m *testing.M) {
	code := m.Run()
	cluster.RemoveBinary()
	os.Exit(code)
}
