package main

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestServeFlagErrorsExit2: a serve flag with a value it cannot take,
// whether pflag refuses it while parsing (a negative limit, a word for a
// number) or serve does after (a negative timeout), ends serve with status
// 2, and before it serves anything.
func TestServeFlagErrorsExit2(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, args := range [][]string{
		{"--store-max-keys", "-1"},
		{"--store-max-keys=-1"},
		{"--store-max-bytes", "-1"},
		{"--store-max-total", "-1"},
		{"--store-max-keys", "many"},
		{"--max-connections", "-1"},
		{"--max-connections", "x"},
		{"--events-buffer", "-1"},
		{"--history-keep", "-1"},
		{"--history-days", "-1"},
		{"--idle-timeout", "-1s"},
		{"--read-timeout", "-1s"},
		{"--write-timeout", "-1s"},
		{"--idle-timeout", "soon"},
		{"--strict-fencing=maybe"},
		{"--no-such-flag"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		full := append([]string{"serve", "--db", filepath.Join(t.TempDir(), "f.db"), "--listen", "127.0.0.1:0"}, args...)
		out, err := exec.CommandContext(ctx, bin, full...).CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("serve %v: %v, want exit status 2\n%s", args, err, out)
		}
	}
}
