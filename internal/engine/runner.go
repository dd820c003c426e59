package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/failpoint"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// runner maps operations to transactions on one database: one each (do),
// many in one (a group: the server's group commit; a batch: a replay on
// PostgreSQL), and reads apart from the writer (apart). On a database with
// peers each transaction first takes the lock that serializes every
// server's transactions. It owns the rules' State, numbers events, tells
// the other servers (peers.go), and hands each transaction's events to its
// hooks: before the COMMIT (the audit log) and after it. The rules never
// see which.
type runner struct {
	mu  sync.Mutex
	db  *repo.DB
	cfg service.Config
	st  service.State
	id  string // the service's identity, created with its database (repo.ServiceID)
	// peers: other servers use the database too (PostgreSQL); nil on
	// SQLite. Then st is read afresh at the start of every transaction,
	// under the lock that serializes all of them, and dbNow is the
	// database's clock read there (and again by lateStart).
	peers *peerLink
	dbNow float64
	// numbered: events are numbered with the service row's counter, and
	// on a database with peers all of them are published (GET /v1/events,
	// which a server serves); without, transactions write and send nothing
	// more (leasekeeper run).
	numbered bool
	hooks    hooks
	// events are the open transaction's (a group's: all its operations').
	events []service.Event
	// op and opEvents are the context of the operation under way (do).
	op       service.Op
	opEvents []service.Event

	// group is the open transaction of a group, nil outside one;
	// groupStart is the state to restore if its commit fails.
	group      *repo.Tx
	groupStart service.State
	groupDirty bool // the service row is to be written at the group's commit
	// groupCancel ends the deadline of the group's transaction.
	groupCancel context.CancelFunc
	// mark is the high-water mark outside the database (mark.go), nil
	// without one; markToken is the highest token it has counted.
	mark      *mark
	markToken int64

	// commits counts the groups committed, for failpoint.CommitThenFail.
	commits int
	// groupFailed is the error of an operation of the group that failed
	// (operations have no savepoints to undo one alone): the group must
	// not commit, and runs nothing more. (PostgreSQL answers the COMMIT
	// of a transaction that a failed statement aborted with a silent
	// rollback.)
	groupFailed error
}

// hooks receive what transactions did. They run with the runner locked:
// they must not call it.
type hooks struct {
	// prepare gets the events of each transaction that has some, in
	// order, just before its COMMIT (everything else done, notifications
	// to peers included), and prepareFailed is called when that COMMIT
	// then fails: an audit log written ahead that a kill cannot leave
	// behind the database.
	prepare       func([]service.Event)
	prepareFailed func(error)
	// committed gets them after the COMMIT.
	committed func([]service.Event)
}

// ErrTimeBackwards is returned (wrapping lk.ErrInvalidArguments) by every
// operation whose ts is lower than the service's current time (rule 4).
var ErrTimeBackwards = fmt.Errorf("%w: time runs backwards", lk.ErrInvalidArguments)

// txDeadline bounds a transaction on a database with peers, lock wait (2 s at
// most, repo.ServiceLockTimeout) included. Past it the statement under way is cut
// off with its connection, and the transaction fails as unavailable: a
// database that stalls (a synchronous standby gone, a network that drops
// packets) must not hold the server, nor everything queued behind it.
const txDeadline = 15 * time.Second

// openRunner opens the database at path and reads its service row.
func openRunner(ctx context.Context, path string, db repo.Options, rules service.Config) (*runner, error) {
	d, err := repo.Open(ctx, path, db)
	if err != nil {
		return nil, err
	}
	r := &runner{db: d, cfg: rules}
	r.st.NextExpiry, r.st.PruneAt = math.MinInt64, math.MinInt64
	if d.HasPeers() {
		r.peers = newPeerLink()
	}
	err = r.readOnly(ctx, func(tx *repo.Tx) error {
		var err error
		if r.st.Counters, err = repo.ServiceCounters(tx); err != nil {
			return err
		}
		r.id, err = repo.ServiceID(tx)
		return err
	})
	if err != nil {
		d.Close()
		return nil, err
	}
	return r, nil
}

func (r *runner) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.db.Close()
	if merr := r.mark.close(); err == nil {
		err = merr
	}
	return err
}

// readOnly runs fn in a transaction of the writer's connection that is
// rolled back: it changes nothing, moves no clock and retires nothing.
func (r *runner) readOnly(ctx context.Context, fn func(tx *repo.Tx) error) error {
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return err
	}
	err = fn(tx)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	return err
}

// do runs fn as one operation at time ts: it checks and advances the
// clock, retires lapsed leases (service.Settle), calls fn, and finishes
// (service.Finish). The transaction commits when fn succeeds or returns a
// refusal (service.IsRefusal: a result, after which the time advance and
// the lapses stand), and rolls back on any other error or a panic. Inside
// a group it is the group's transaction, and an operation that fails there
// fails the group (groupFailed).
func (r *runner) do(ctx context.Context, ts int64, fn func(op *service.Op) error) (err error) {
	// A cancelled caller starts nothing new; an operation that has started
	// runs to completion. Its statements get a context without cancellation:
	// half an operation is never useful, and database/sql watches a
	// cancellable context at every statement, which cost about 30% of a
	// replay's time.
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	grouped := r.group != nil
	tx := r.group
	if !grouped {
		if r.peers != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, txDeadline)
			defer cancel() // after the deferred rollback below
		}
		r.events = r.events[:0]
		if tx, err = r.begin(ctx); err != nil {
			return err
		}
	}
	if grouped && r.groupFailed != nil {
		// The group will not commit: nothing run in it now would last,
		// and on SQLite the failure may have ended its transaction, so
		// that the statements would commit one by one.
		return fmt.Errorf("%w: %w", errGroupFailed, r.groupFailed)
	}
	if r.st.ClockSet && ts < r.st.Clock && !failpoint.Enabled(failpoint.TimeBackwards) {
		if !grouped {
			tx.Rollback()
		}
		return ErrTimeBackwards
	}
	// The operations of a group have no savepoints: a failed operation
	// fails its whole group (groupFailed). An operation fails only when
	// the database does, or on a bug: contract errors are results, a lost
	// connection loses the transaction anyway, and on SQLite a full disk
	// fails the group's COMMIT too. A savepoint and its release cost two
	// round trips on PostgreSQL, a third of an operation's, and on SQLite
	// two statements and a copy of every page each operation writes first
	// (its subjournal): about 5 % of the committer's time per operation
	// (docs/performance.md, "No savepoints on SQLite either").
	start := r.st
	done := false
	defer func() {
		if done {
			return
		}
		// Undo the state with the transaction; an unknown NextExpiry
		// only costs one lapse query later.
		switch {
		case grouped && r.groupFailed == nil:
			r.groupFailed = err
			if err == nil {
				r.groupFailed = errors.New("an operation panicked")
			}
		case !grouped:
			tx.Rollback()
		}
		r.st = start
		r.st.NextExpiry = math.MinInt64
	}()
	r.st.Clock, r.st.ClockSet = ts, true
	// One Op, and one buffer for its events, serve every operation in turn
	// (r.mu is held): an operation costs no allocation for them.
	op := &r.op
	*op = service.Op{Tx: tx, Now: ts, Config: &r.cfg, State: &r.st, Events: r.opEvents[:0]}
	defer func() { r.opEvents = op.Events[:0] }()
	if err := service.Settle(op); err != nil {
		return err
	}
	if err = fn(op); err != nil && !service.IsRefusal(err) {
		return err
	}
	if xerr := service.Finish(op); xerr != nil {
		return xerr
	}
	if r.numbered {
		for i := range op.Events {
			r.st.EventID++
			op.Events[i].ID = r.st.EventID
		}
	}
	// On a database with peers, the service row must be exact: nobody
	// there reads the clients table for the counter.
	if r.st.Clock != start.Clock || !start.ClockSet || op.Unregistered || r.rowChanged(start.Counters) {
		if grouped {
			r.groupDirty = true // closeGroup writes it
		} else if werr := repo.ServiceCountersSet(tx, r.st.Counters); werr != nil {
			return werr
		}
	}
	if grouped {
		// Durable, and announced, only when the group commits.
		r.events = append(r.events, op.Events...)
		done = true
		return err
	}
	r.events = append(r.events, op.Events...)
	if cerr := r.commit(tx); cerr != nil {
		return cerr
	}
	done = true
	r.committed()
	return err
}

// begin starts a transaction. On a database with peers it first takes the lock
// that serializes every transaction of every process (repo.ServiceRowLock) and reloads
// what other processes may have changed since this one's last transaction.
func (r *runner) begin(ctx context.Context, ahead ...repo.Warm) (*repo.Tx, error) {
	tx, err := r.db.Begin(ctx)
	if err != nil || r.peers == nil {
		return tx, err
	}
	l, err := repo.ServiceRowLock(tx, ahead...)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	r.st.Counters, r.dbNow, r.st.NextExpiry = l.Counters, l.DBNow, l.EarliestExpiry
	return tx, nil
}

// commit tells the other servers and the prepare hook what the
// transaction did, and commits it.
func (r *runner) commit(tx *repo.Tx) error {
	if err := r.peers.publish(tx, r.events, r.numbered, r.st.EventID); err != nil {
		return err
	}
	var mc markCounters
	if r.mark != nil {
		// Before the audit lines: none may carry a token past the
		// reservation.
		mc = r.markNow()
		if err := r.mark.reserve(mc); err != nil {
			return err
		}
	}
	if r.hooks.prepare != nil && len(r.events) > 0 {
		r.hooks.prepare(r.events)
	}
	if err := tx.Commit(); err != nil {
		if r.hooks.prepareFailed != nil && len(r.events) > 0 {
			r.hooks.prepareFailed(err)
		}
		return commitSent(err)
	}
	if r.mark != nil {
		r.markToken = mc.Token
		// Not synced, and its failure fails nothing: the transaction is
		// committed, and reserved still bounds it.
		r.mark.saw(mc)
	}
	return nil
}

// ErrOutcomeUnknown marks the error of an operation whose transaction's
// COMMIT was sent and failed: the database may have committed it all the
// same (a connection lost after the database received the COMMIT, a
// deadline cut off while it ran), so the caller must not be told that the
// operation did not happen. Every other failure of an operation comes
// before its COMMIT is sent, and leaves nothing behind.
var ErrOutcomeUnknown = errors.New("the commit was sent, and its outcome is unknown")

// commitSent marks err, a COMMIT's failure, with ErrOutcomeUnknown.
func commitSent(err error) error {
	if failpoint.Enabled(failpoint.WrongNotApplied) {
		return err // the fault: as if the COMMIT had never gone out
	}
	return fmt.Errorf("%w (%w)", err, ErrOutcomeUnknown)
}

// commitThenFail is the environment's fault failpoint.CommitThenFail: a
// group's COMMIT that succeeded answers as a lost connection would.
func (r *runner) commitThenFail() error {
	if !failpoint.Enabled(failpoint.CommitThenFail) {
		return nil
	}
	if r.commits++; r.commits%failpoint.CommitThenFailEvery != 0 {
		return nil
	}
	return commitSent(fmt.Errorf("%w: the connection was lost during the COMMIT (failpoint %s)", lk.ErrUnavailable, failpoint.CommitThenFail))
}

// committed hands the committed transaction's events to the hook.
func (r *runner) committed() {
	if r.hooks.committed != nil && len(r.events) > 0 {
		r.hooks.committed(r.events)
	}
}

// rowChanged reports whether the service row must be written at the end
// of the operation for what c holds besides the clock: the event counter,
// and on a database with peers everything. There a counter that alone
// moved is written by publish's first notification instead, in the same
// statement (repo.NotifyEventID): a round trip less while every server
// waits for the service row's lock.
func (r *runner) rowChanged(start repo.Counters) bool {
	if r.peers == nil {
		return r.st.EventID != start.EventID
	}
	c := r.st.Counters
	if r.numbered {
		c.EventID = start.EventID
	}
	return c != start
}

// groupRun runs fn, and every operation on r while fn runs, in one transaction
// (an operation that fails fails the group: do), one commit and one sync to
// disk for all of them. This is group commit: the
// caller must answer none of those operations before groupRun returns nil. If
// the commit fails, every one of them is undone and groupRun returns the error.
// Events reach the committed hook after the commit. markDirty, called
// while fn runs, makes the group write the service row even if no
// operation changed it: a readiness probe (an empty group commits without
// writing anything, so its success says nothing of a full disk). ahead are
// the first reads of the group's first operations, sent with the
// transaction's first round trip (repo.Warm); nil for none.
func (r *runner) groupRun(ctx context.Context, ahead []repo.Warm, fn func()) (err error) {
	ctx = context.WithoutCancel(ctx) // as in do
	if err := r.openGroup(ctx, ahead); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			r.closeGroup(false) // fn panicked
		}
	}()
	fn()
	committed = true
	return r.closeGroup(true)
}

// sendAhead has the open group's transaction send ws's reads with its
// next batch (repo.Tx.SendAhead).
func (r *runner) sendAhead(ws []repo.Warm) {
	if len(ws) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group != nil {
		r.group.SendAhead(ws...)
	}
}

// lateStart readies the open group for operations taken after it began
// (committer.waiting, once more), and sends their first reads ahead. On a
// database with peers their ts comes from the database's clock, read when
// the group took its lock, before they came: a lease would start before its request, and
// end more than the second that docs/api.md allows before the request's
// moment plus its ttl. The clock is read again, with the reads, in one
// round trip; its failure (or that of the writes queued before it, which
// go with it) fails the group, and ok is false: the late operations must
// not run in it.
func (r *runner) lateStart(ahead []repo.Warm) (ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group == nil || r.groupFailed != nil {
		return false
	}
	if r.peers == nil {
		r.group.SendAhead(ahead...)
		return true
	}
	now, err := repo.DatabaseClock(r.group, ahead...)
	if err != nil {
		r.groupFailed = err
		return false
	}
	r.dbNow = max(r.dbNow, now)
	return true
}

// errGroupFailed is a group's error when one of its operations failed: the
// operations have no savepoints, so that fails them all.
var errGroupFailed = errors.New("an operation of the group failed, so none of it was committed")

// openGroup starts the transaction of a group.
func (r *runner) openGroup(ctx context.Context, ahead []repo.Warm) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group != nil {
		return errors.New("engine: a group inside a group")
	}
	cancel := context.CancelFunc(func() {})
	if r.peers != nil {
		ctx, cancel = context.WithTimeout(ctx, txDeadline)
	}
	tx, err := r.begin(ctx, ahead...)
	if err != nil {
		cancel()
		return err
	}
	r.groupCancel = cancel
	r.group, r.groupStart, r.events = tx, r.st, r.events[:0]
	r.groupDirty, r.groupFailed = false, nil
	return nil
}

// closeGroup commits (or, with commit false, rolls back) the open group's
// transaction; a failed commit rolls back too. The service row is written
// here, once for the whole group: rewriting one row at every operation of a
// long transaction costs PostgreSQL a longer chain of row versions each time.
func (r *runner) closeGroup(commit bool) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	tx := r.group
	if tx == nil {
		return nil
	}
	r.group = nil
	defer r.groupCancel()
	if commit && r.groupFailed != nil {
		err = fmt.Errorf("%w: %w", errGroupFailed, r.groupFailed)
	}
	if commit && err == nil && r.groupDirty {
		err = repo.ServiceCountersSet(tx, r.st.Counters)
	}
	if commit && err == nil {
		err = r.commit(tx)
	}
	if !commit || err != nil {
		tx.Rollback()
		r.st = r.groupStart
		r.st.NextExpiry = math.MinInt64
		r.events = r.events[:0]
		return err
	}
	r.committed()
	return r.commitThenFail()
}

// checkpoint writes what committed into the database's main file
// (repo.DB.Checkpoint), between groups.
func (r *runner) checkpoint(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group != nil {
		return errors.New("engine: a checkpoint inside a group")
	}
	return r.db.Checkpoint(ctx)
}

// markDirty makes the open group write the service row at its commit, as
// an operation that changed the clock would: the readiness probe's write.
// Outside a group it does nothing.
func (r *runner) markDirty() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.group != nil {
		r.groupDirty = true
	}
}

// batchOps is how many operations a batch runs per transaction: enough to
// spread a transaction's round trips thin, few enough that rows written by
// every operation (a busy lock's) keep short version chains.
const batchOps = 64

// batch runs fn, which runs operations and calls step after each, in
// transactions of batchOps operations, when the database has peers and no
// group is open; otherwise step does nothing, and each operation has its own
// transaction as usual. On PostgreSQL a transaction costs several round
// trips beyond its operation's own, which a replay of many operations need
// not pay each time; on SQLite a transaction costs about what a savepoint
// does. Each transaction commits before the next begins, so a failure loses
// at most the operations of the last one.
func (r *runner) batch(ctx context.Context, fn func(step func() error) error) error {
	ctx = context.WithoutCancel(ctx)
	r.mu.Lock()
	plain := r.peers == nil || r.group != nil
	r.mu.Unlock()
	if plain {
		return fn(func() error { return nil })
	}
	if err := r.openGroup(ctx, nil); err != nil {
		return err
	}
	n := 0
	err := fn(func() error {
		if n++; n < batchOps {
			return nil
		}
		n = 0
		if err := r.closeGroup(true); err != nil {
			return err
		}
		return r.openGroup(ctx, nil)
	})
	if cerr := r.closeGroup(err == nil); err == nil {
		err = cerr
	}
	return err
}

// apart runs fn as a read at ts on a connection apart from the writer's
// (service.Op.Apart), concurrently with everything else, groups included.
// It answers service.ErrNeedsTx where the database has no such connection
// (a private in-memory one), and fn may answer it too.
func (r *runner) apart(ctx context.Context, ts int64, fn func(op *service.Op) error) error {
	if !r.db.CanReadApart() {
		return service.ErrNeedsTx
	}
	return r.db.Read(ctx, func(tx *repo.Tx) error {
		return fn(&service.Op{Tx: tx, Now: ts, Config: &r.cfg, State: &service.State{}, Apart: true})
	})
}

// clock returns the service's current time; ok is false before the first
// operation. On a database with peers, outside a group, it reads the
// database: other processes may have moved the time since this one last
// looked.
func (r *runner) clock() (ts int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.peers != nil && r.group == nil {
		r.readOnly(context.Background(), func(tx *repo.Tx) error {
			c, err := repo.ServiceCounters(tx)
			if err == nil {
				r.st.Clock, r.st.ClockSet = c.Clock, c.ClockSet
			}
			return err
		})
	}
	return r.st.Clock, r.st.ClockSet
}

// databaseTime returns the database's clock (Unix seconds, with a fraction)
// as read when the open group took its lock, or later for its late
// operations (lateStart), on a database with peers; ok is false otherwise.
func (r *runner) databaseTime() (t float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dbNow, r.peers != nil && r.group != nil
}

// nextExpiry returns a time at or before the earliest expires_at of all
// leases (math.MaxInt64 when there are none): when to run an operation so
// that lapses are retired on time. It may be early; an operation then finds
// nothing and the next call answers exactly.
func (r *runner) nextExpiry() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.NextExpiry
}

// noteExpiry lowers nextExpiry to at, for a lease another server granted
// or renewed; at math.MinInt64 it makes it unknown.
func (r *runner) noteExpiry(at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.NoteExpiry(at)
}

// lastEventID returns the id of the last event this runner numbered, or
// read from the service row when it last began a transaction: on a
// database without peers, the last event committed.
func (r *runner) lastEventID() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.EventID
}

// auditCommitted is the Auditor's question at Open: did the previous run's
// last group commit? It runs before any transaction of this runner. On a
// database with peers the answer is unknown: other servers may have run
// transactions since.
func (r *runner) auditCommitted(ctx context.Context, ws []service.Witness) (committed, known bool, err error) {
	if r.peers != nil || len(ws) == 0 {
		return false, false, nil
	}
	err = r.readOnly(ctx, func(tx *repo.Tx) error {
		committed, known, err = service.AuditCommitted(tx, ws)
		return err
	})
	return committed, known, err
}
