package engine

import (
	"context"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// Direct runs the rules synchronously: each call is one operation at the
// instant ts its caller gives, in the caller's goroutine, in a transaction
// of its own (or, on PostgreSQL, of a Batch). It starts no goroutine and
// reads no clock: what `leasekeeper run` replays, and what the contract's
// tests drive (harness.Engine). A ts lower than the service's time is
// refused as ErrTimeBackwards (rule 4), which Engine never asks for. It is
// not safe for use by several goroutines at once, but for its reads.
type Direct struct {
	r *runner
}

// OpenDirect opens the database at path (as Open does) for synchronous
// use.
func OpenDirect(ctx context.Context, path string, db repo.Options, rules service.Config) (*Direct, error) {
	r, err := openRunner(ctx, path, db, rules)
	if err != nil {
		return nil, err
	}
	return &Direct{r: r}, nil
}

// Close closes the database.
func (d *Direct) Close() error { return d.r.close() }

// Clock returns the service's current time; ok is false before the first
// operation.
func (d *Direct) Clock() (ts int64, ok bool) { return d.r.clock() }

// Advance moves the service's time to ts without any other operation, and
// retires the leases that lapsed by then (rule 5: an operation that fails
// validation after its ts was accepted still advances time).
func (d *Direct) Advance(ctx context.Context, ts int64) error {
	return d.r.do(ctx, ts, func(*service.Op) error { return nil })
}

// Batch runs fn, whose operations call step after each, in transactions of
// many operations on a database with peers, where a transaction costs
// round trips that a replay need not pay each time (harness.Run uses it).
func (d *Direct) Batch(ctx context.Context, fn func(step func() error) error) error {
	return d.r.batch(ctx, fn)
}

// Group runs fn, and every operation of d while fn runs, in one
// transaction, as the server's group commit does: one commit for all, and
// none when an operation fails other than by a refusal.
func (d *Direct) Group(ctx context.Context, fn func()) error { return d.r.groupRun(ctx, nil, fn) }

// OnCommit sets the function that gets, after each commit, the events of
// the transaction's operations, in order (nil: none). It must not call d.
func (d *Direct) OnCommit(fn func([]service.Event)) {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	d.r.hooks.committed = fn
}

// Acquire runs service.Acquire at ts.
func (d *Direct) Acquire(ctx context.Context, ts int64, q lk.AcquireRequest) (lk.AcquireResult, error) {
	return exec(d.r, ctx, ts, q, service.Acquire)
}

// Renew runs service.Renew at ts.
func (d *Direct) Renew(ctx context.Context, ts int64, q lk.RenewRequest) (lk.RenewResult, error) {
	return exec(d.r, ctx, ts, q, service.Renew)
}

// Release runs service.Release at ts.
func (d *Direct) Release(ctx context.Context, ts int64, q lk.ReleaseRequest) (lk.ReleaseResult, error) {
	return exec(d.r, ctx, ts, q, service.Release)
}

// Write runs service.Write at ts, for a caller that may act as any client.
func (d *Direct) Write(ctx context.Context, ts int64, q lk.WriteRequest) (lk.WriteResult, error) {
	return exec(d.r, ctx, ts, q, func(op *service.Op, q lk.WriteRequest) (lk.WriteResult, error) {
		return service.Write(op, q, nil)
	})
}

// Read runs service.Read at ts.
func (d *Direct) Read(ctx context.Context, ts int64, q lk.ReadRequest) (lk.ReadResult, error) {
	return exec(d.r, ctx, ts, q, service.Read)
}

// Inspect runs service.Inspect at ts.
func (d *Direct) Inspect(ctx context.Context, ts int64, q lk.InspectRequest) (lk.InspectResult, error) {
	return exec(d.r, ctx, ts, q, service.Inspect)
}

// Status runs service.Status at ts, as an operation.
func (d *Direct) Status(ctx context.Context, ts int64, q lk.StatusRequest) (lk.StatusResult, error) {
	return exec(d.r, ctx, ts, q, service.Status)
}

// Apart runs the read fn at ts apart from the writer, as a server does
// (service.Op.Apart); it answers service.ErrNeedsTx where fn does, or where
// the database has no read connection.
func Apart[Q, R any](d *Direct, ctx context.Context, ts int64, q Q, fn func(*service.Op, Q) (R, error)) (R, error) {
	var res R
	err := d.r.apart(ctx, ts, func(op *service.Op) error {
		var err error
		res, err = fn(op, q)
		return err
	})
	return res, err
}

// Do runs fn as one operation at ts: the rules that Direct has no method
// for (service.Revoke, service.Unfence, service.History, ...), and tests
// that look at the operation's context.
func Do[Q, R any](d *Direct, ctx context.Context, ts int64, q Q, fn func(*service.Op, Q) (R, error)) (R, error) {
	return exec(d.r, ctx, ts, q, fn)
}

// CollectStats starts counting the time of every SQL statement
// (leasekeeper run --stmt-stats; repo.DB.CollectStats).
func (d *Direct) CollectStats() {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	d.r.db.CollectStats()
}

// Stats returns the statement counts since CollectStats, most time first.
func (d *Direct) Stats() []repo.StatementStats {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	return d.r.db.Stats()
}

// PagesRead returns how many pages the database has read so far: for
// tests of what an operation costs.
func (d *Direct) PagesRead() (int64, error) {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	return d.r.db.PagesRead()
}

// Summary reads the database's summary without changing anything.
func (d *Direct) Summary(ctx context.Context) (service.Summary, error) {
	var sum service.Summary
	err := d.r.readOnly(ctx, func(tx *repo.Tx) error {
		var err error
		sum, err = service.ReadSummary(tx)
		return err
	})
	return sum, err
}
