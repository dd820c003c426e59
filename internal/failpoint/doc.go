// Package failpoint plants faults in the server for the robustness tests
// (internal/e2e, docs/robustness.md): each failpoint is a named wrong
// behaviour, off unless the process was started with its name in the
// environment variable LEASEKEEPER_FAILPOINTS (names separated by commas).
//
// Failpoints exist only in a binary built with the build tag "failpoints"
// (go build -tags failpoints). Without it, Enabled and First are constant
// false: the compiler drops every branch they guard, and the normal binary
// holds no trace of them (TestNoFailpointsWithoutTag checks with go tool
// nm). etcd's gofail rewrites the source to the same end; a build tag is
// simpler and leaves the source as it is read.
//
// The failpoints, and where they act:
//
//	accept-stale-write  service/store.go: the fenced store accepts a write
//	                    whose token is lower than the highest it accepted
//	reissue-token       service/acquire.go: the first grant on the spot of
//	                    each lock after the process started hands out the
//	                    lock's last token again, as a server that lost its
//	                    counter in a crash would
//	answer-before-commit
//	                    internal/engine/committer.go: the group committer answers a
//	                    group's operations before its COMMIT, then commits
//	                    after a short sleep (a kill -9 in between loses
//	                    what was acknowledged)
//	grant-early         service/handover.go: a lapse hands the lock over one
//	                    second before the lapsed lease's expires_at
//	drop-wakeup         internal/engine/wait.go: a blocked acquire is not told of
//	                    its grant; it learns of it only when its wait ends
//	                    or something makes it read its state
//	skip-handover       service/release.go: a release or revoke takes the
//	                    lock to have nobody waiting, and does not hand it
//	                    over (the guard is the waiters' count that
//	                    repo.LeaseEnd returns, which lets an operation skip
//	                    the queue's reads on both dialects; a wrong count
//	                    strands the queue)
//	skip-service-lock   repo/service.go: on PostgreSQL, a transaction reads
//	                    the service row without locking it (no FOR
//	                    UPDATE), so two servers' transactions interleave
//	time-backwards      internal/engine/committer.go and runner.go: the time
//	                    follows its clock back (the guards that keep each
//	                    group's time at or above the last, and refuse a
//	                    transaction at a time below the service's, are
//	                    skipped)
//	wrong-not-applied   internal/engine/runner.go: a COMMIT that failed is
//	                    not marked as sent, so the 503 it ends in says
//	                    "applied": false although the database may have
//	                    committed it (planted with commit-then-fail,
//	                    which makes it so)
//	warm-survives-write repo/warm.go, internal/engine/committer.go: on
//	                    PostgreSQL, the rows of reads sent ahead of their
//	                    operation are kept through every later statement
//	                    of the transaction, so an operation may decide on
//	                    a state that an earlier one in its group changed;
//	                    and every operation's read goes ahead, also past
//	                    an earlier one on its lock (which the runtime
//	                    holds back only because its rows would be
//	                    dropped; without that, the fault would show only
//	                    after a lapse or a hand-over in the group, which
//	                    internal/engine's TestReadsAhead plants)
package failpoint

// EnvVar names the environment variable that enables failpoints in a
// process built with the tag.
const EnvVar = "LEASEKEEPER_FAILPOINTS"

// The failpoints' names.
const (
	AcceptStaleWrite   = "accept-stale-write"
	ReissueToken       = "reissue-token"
	AnswerBeforeCommit = "answer-before-commit"
	GrantEarly         = "grant-early"
	DropWakeup         = "drop-wakeup"
	SkipServiceLock    = "skip-service-lock"
	SkipHandover       = "skip-handover"
	WrongNotApplied    = "wrong-not-applied"
	WarmSurvivesWrite  = "warm-survives-write"
)

// All lists every failpoint, for the tests that plant each in turn.
var All = []string{AcceptStaleWrite, ReissueToken, AnswerBeforeCommit, GrantEarly, DropWakeup, SkipServiceLock, SkipHandover, TimeBackwards, WrongNotApplied, WarmSurvivesWrite}
