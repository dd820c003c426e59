package repo

import (
	"regexp"
	"testing"
)

// TestPureReads: the statements that drop no read kept (warm.go) are the
// pure reads, in both dialects; the arguments that a declared write
// names as its lock and client are among its parameters.
func TestPureReads(t *testing.T) {
	for _, d := range []dialect{sqliteDialect{}, postgresDialect{}} {
		texts, err := render(d)
		if err != nil {
			t.Fatal(err)
		}
		pure := pureReads(texts)
		for q, want := range map[statement]bool{
			qRequestStateGet: true, qNextPredecessors: true, qWaitEdgesBeforeQueueing: true, qLockServiceRow: true,
			qQueueAppend: false, qLockGrantTakeToken: false, qLeaseEndOne: false, qGrantsLapse: false,
			qQueueTakeClient: false, qNotifyEventID: false, qBegin: false, qRollbackToSavepoint: false,
		} {
			if texts[q] != "" && pure[q] != want {
				t.Errorf("%s (%s): pure read %v, want %v: %s", q, d, pure[q], want, texts[q])
			}
		}
		params := regexp.MustCompile(`[?$](\d*)`)
		for q, f := range footprints {
			if pure[q] {
				t.Errorf("%s (%s) has a footprint and is a pure read", q, d)
			}
			n := 0
			for i, m := range params.FindAllStringSubmatch(texts[q], -1) {
				k := i + 1
				if m[1] != "" {
					k = 0
					for _, c := range m[1] {
						k = k*10 + int(c-'0')
					}
				}
				n = max(n, k)
			}
			if texts[q] != "" && (f.lock >= n || f.client >= n) {
				t.Errorf("%s (%s): footprint %+v, but %d parameters", q, d, f, n)
			}
		}
	}
}
