package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
	buildOut  []byte
)

// Binary returns the path of the leasekeeper binary, built once per test
// process. It is built with the build tag failpoints exactly when this
// package was (failpoint.Compiled), so that `go test -tags failpoints`
// drives servers that have them and a plain `go test` servers that do not.
// The binary lives in a directory of its own that RemoveBinary deletes;
// call it from TestMain.
func Binary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "leasekeeper-e2e-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "leasekeeper")
		args := []string{"build", "-o", buildBin}
		if failpoint.Compiled {
			args = append(args, "-tags", "failpoints")
		}
		args = append(args, "github.com/leasekeeper/leasekeeper/cmd/leasekeeper")
		buildOut, buildErr = exec.Command("go", args...).CombinedOutput()
	})
	if buildErr != nil {
		tb.Fatalf("e2e: go build of the leasekeeper binary: %v\n%s", buildErr, buildOut)
	}
	return buildBin
}

// RemoveBinary deletes the binary Binary built, if any.
func RemoveBinary() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
