package repo

// Reads apart from the writer. A DB's one connection carries the server's
// group commits, one at a time; a listing of 100,000 locks run there held
// every acquire behind it (issue 12). Read runs read-only work on
// connections of its own instead: on SQLite in WAL mode a reader sees the
// last committed state and neither waits for the writer nor holds it up; on
// PostgreSQL a REPEATABLE READ READ ONLY transaction takes no lock on the
// service row, the one every writer of every server queues for.
//
// What a reader sees is the last commit, not the time the caller asks
// about: a lease whose expires_at has passed stays in the tables until a
// write transaction retires it (the server's lapse timer, normally within
// milliseconds). The functions of this file take now and leave such leases
// out, as a transaction at now would have retired them, and report where
// that is not enough: where the retirement would also hand a lock over to
// its waiters (unsettled).

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	lk "github.com/leasekeeper/leasekeeper"
)

// readConns bounds the read connections of a DB. Reads are short (a page
// is at most lk.MaxLocksLimit rows), so a few serve many callers; on
// PostgreSQL each is a connection of the server's budget.
const readConns = 4

// ErrNoReadConnection is Read's error for a database that has no
// connection apart from the writer's: a private in-memory SQLite database
// exists on one connection only. The caller reads in a write transaction
// instead.
var ErrNoReadConnection = errors.New("repo: this database has no read connection apart from the writer's")

// readPool holds the read connections of a DB, each a DB of its own (its
// connection, its prepared statements), opened when first needed.
type readPool struct {
	open  func(ctx context.Context) (*DB, error)
	idle  chan *DB      // open readers not in use
	slots chan struct{} // one per reader open or being opened

	mu     sync.Mutex
	closed bool
}

func newReadPool(open func(ctx context.Context) (*DB, error)) *readPool {
	return &readPool{open: open, idle: make(chan *DB, readConns), slots: make(chan struct{}, readConns)}
}

// sqliteReads is the read pool of the SQLite file at path, whose writer is
// w: read-only connections (mode=ro), which cannot write the file by
// mistake nor take its write lock.
func sqliteReads(w *DB, path string) *readPool {
	dsn := "file:" + escapePath(path) + "?mode=ro&_pragma=busy_timeout(10000)"
	return newReadPool(func(ctx context.Context) (*DB, error) {
		sdb, err := sqlx.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		return w.reader(ctx, sdb)
	})
}

// postgresReads is the read pool of w, a PostgreSQL database: connections
// of the configuration w was opened with.
func postgresReads(w *DB) *readPool {
	cfg := w.pgcfg.Copy()
	cfg.Tracer = nil // the writer's round trips are counted, not a reader's
	if cfg.ValidateConnect == nil {
		// A standby answers READ ONLY transactions too, from a state
		// behind the primary's, and the writer's way of finding out (a
		// write refused) is not a reader's: readers connect only to a
		// server that takes writes, as target_session_attrs=read-write
		// would have them.
		cfg.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	return newReadPool(func(ctx context.Context) (*DB, error) {
		return w.reader(ctx, sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx"))
	})
}

// reader makes a reader of w from sdb: one pinned connection, w's
// statements (prepared on it when first run).
func (w *DB) reader(ctx context.Context, sdb *sqlx.DB) (*DB, error) {
	sdb.SetMaxOpenConns(1)
	conn, err := sdb.Connx(ctx)
	if err != nil {
		sdb.Close()
		// As a write would find it: the database is away (w's own
		// connection is not the one that failed).
		err, _, _ = w.dialect.failed(err)
		return nil, err
	}
	return &DB{db: sdb, conn: conn, dialect: w.dialect, texts: w.texts, stmts: make([]*sqlx.Stmt, len(w.texts)),
		pgcfg: w.pgcfg, channel: w.channel}, nil
}

// get returns a reader: an idle one, a new one while there is room, or the
// first one handed back.
func (p *readPool) get(ctx context.Context) (*DB, error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, errors.New("repo: the database is closed")
	}
	select {
	case r := <-p.idle:
		return r, nil
	default:
	}
	select {
	case r := <-p.idle:
		return r, nil
	case p.slots <- struct{}{}:
		r, err := p.open(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put hands r back, or closes it once the pool is closed.
func (p *readPool) put(r *DB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		r.Close()
		<-p.slots
		return
	}
	p.idle <- r // never blocks: at most readConns readers exist
}

// close closes the idle readers; those in use close when handed back.
func (p *readPool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for {
		select {
		case r := <-p.idle:
			r.Close()
			<-p.slots
		default:
			return
		}
	}
}

// CanReadApart reports whether Read has connections apart from the writer's
// (not for a private in-memory database).
func (d *DB) CanReadApart() bool { return d.reads != nil }

// Read runs fn in a read-only transaction on a connection apart from the
// writer's, on the last committed state. Unlike the rest of DB, it is safe
// for concurrent use, with itself and with the writer. fn must only read.
// It returns ErrNoReadConnection when the database has no such connection.
func (d *DB) Read(ctx context.Context, fn func(tx *Tx) error) error {
	if d.reads == nil {
		return ErrNoReadConnection
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// As a write does (package service): a statement cut off half-way is
	// no use, and a cancellable context costs SQLite a watcher per
	// statement. A read is bounded by its page instead, and on PostgreSQL
	// by a deadline.
	rctx := context.WithoutCancel(ctx)
	if deadline := d.dialect.readDeadline(); deadline > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(rctx, deadline)
		defer cancel()
	}
	r, err := d.reads.get(ctx)
	if err != nil {
		return err
	}
	defer d.reads.put(r)
	if err := r.recover(rctx); err != nil {
		return err
	}
	tx := &Tx{d: r, ctx: rctx}
	if _, err := tx.exec(qReadBegin); err != nil {
		return err
	}
	err = fn(tx)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	return err
}

// Everything below takes now, leaves out the leases with expires_at <= now
// (usable while now < expires_at: L1), and runs on a read Tx or a write one.

// NoLimit asks the paged reads below for every row.
const NoLimit = 0

var qClientHead = portable("ClientHead", `SELECT c.age, q.lock,
		       CASE WHEN q.lock IS NOT NULL THEN EXISTS (SELECT 1 FROM leases l WHERE l.lock = q.lock AND l.expires_at <= ?2) END
		  FROM clients c LEFT JOIN queue_entries q ON q.client = c.name WHERE c.name = ?1`)

// ClientHead is what status says of a client besides its holds.
type ClientHead struct {
	Age        int64  // 0 when unregistered
	WaitingFor string // "" when not waiting
	// Unsettled: a holder of the lock the client waits for has a lease
	// that ended by now and is not retired yet. Its retirement may grant
	// the lock to the client, or move it up the queue: only a write
	// transaction at now knows the client's wait.
	Unsettled bool
}

// ClientHeadGet reads client's age and wait as of now.
func ClientHeadGet(tx *Tx, client string, now int64) (ClientHead, error) {
	var age sql.NullInt64
	var waiting sql.NullString
	var unsettled sql.NullBool
	_, err := tx.row(qClientHead, []any{client, now}, &age, &waiting, &unsettled)
	return ClientHead{Age: age.Int64, WaitingFor: waiting.String, Unsettled: unsettled.Bool}, err
}

var qHoldsPage = portable("HoldsPage", `SELECT lock, mode, token, expires_at FROM leases
		WHERE client = ?1 AND lock > ?2 AND expires_at > ?3 ORDER BY lock LIMIT ?4`)

// HoldsPage returns client's live leases at now by lock name: at most limit
// of those after `after` ("" for the first page), all of them for NoLimit;
// more is true when a next page has some. It reads leases_by_client from
// `after` on, so a page costs what it shows, not all the client holds.
func HoldsPage(tx *Tx, client, after string, limit int, now int64) (page []lk.Holder, more bool, err error) {
	n := int64(math.MaxInt64)
	if limit != NoLimit {
		n = int64(limit) + 1
	}
	var rows []LeaseRow
	err = tx.selectAll(&rows, qHoldsPage, client, after, now, n)
	if limit != NoLimit && len(rows) > limit {
		rows, more = rows[:limit], true
	}
	return holdsOf(rows), more, err
}

// liveLocks is LocksLive's statement for a page from the name ?1 on, after
// it (cond "lock > ?1") or from it (cond "lock >= ?1"), ?2 the limit: the
// locks with leases of ?3 and later or with waiters, and for each lock
// whether a lease of it ended by ?3 while clients wait for it. The unary plus keeps SQLite off the
// expiry index, which would read every live lease to find a page's names.
// facts is materialized so that each lock's own columns are computed once,
// not once per holder: whether a lease of it ended is a scan of its leases,
// and once per holder of 20,000 shared ones that was a minute.
func liveLocks(cond string) string {
	return `WITH active(lock) AS (
		SELECT lock FROM (SELECT DISTINCT lock FROM leases WHERE ` + cond + ` AND +expires_at > ?3 ORDER BY lock LIMIT ?2) AS h
		UNION
		SELECT lock FROM (SELECT DISTINCT lock FROM queue_entries WHERE ` + cond + ` ORDER BY lock LIMIT ?2) AS w
		ORDER BY lock LIMIT ?2),
		facts AS MATERIALIZED (SELECT a.lock, k.queue_length AS waiting,
		       (k.queue_length > 0 AND EXISTS (SELECT 1 FROM leases x WHERE x.lock = a.lock AND x.expires_at <= ?3)) AS unsettled,
		       ` + headQueuedAt + ` AS head_queued_at
		  FROM active a JOIN locks k ON k.name = a.lock)
		SELECT f.lock, f.waiting, f.unsettled, f.head_queued_at,
		       l.client, l.mode, l.token, l.expires_at
		  FROM facts f LEFT JOIN leases l ON l.lock = f.lock AND l.expires_at > ?3
		 ORDER BY f.lock, l.token`
}

var (
	qLocksLiveAfter = portable("LocksLive.after", liveLocks("lock > ?1"))
	qLocksLiveFrom  = portable("LocksLive.from", liveLocks("lock >= ?1"))
)

// LocksLive lists a page of the locks with live leases or waiters at now,
// by name: at most limit of those after `after` ("" for the first page)
// whose names start with prefix; more is true when a next page has some.
// Each source is read through its primary key from the page's first name
// on, so a page costs what it shows, not every lock ever used nor every
// live one. A lock whose only leases ended by now and that nobody waits for
// is left out; the first waiter's wait is counted up to now. unsettled is
// true when a lock of the page has waiters and a lease that ended by now:
// its retirement hands the lock over, which only a write transaction at
// now can tell.
func LocksLive(tx *Tx, prefix, after string, limit int, now int64) (page []lk.LockSummary, more, unsettled bool, err error) {
	// Names that start with prefix come together in byte order, from
	// prefix on: read from there, and stop at the first name without it.
	from, q := after, qLocksLiveAfter
	if prefix > after {
		from, q = prefix, qLocksLiveFrom
	}
	var rows []lockRow
	err = tx.selectAll(&rows, q, from, limit+1, now)
	page, more, unsettled = lockPage(rows, prefix, limit, now)
	return page, more, unsettled, err
}

// qLiveCounts groups the leases in primary-key order, which SQLite streams;
// count(DISTINCT lock) over the expiry index sorted every live lease.
var qLiveCounts = portable("LiveCounts", `SELECT
		(SELECT count(*) FROM (SELECT lock FROM leases WHERE +expires_at > ? GROUP BY lock) AS h),
		(SELECT count(*) FROM queue_entries)`)

// LiveCounts returns how many locks have live leases at now and how many
// queue entries there are, for the metrics' gauges.
func LiveCounts(tx *Tx, now int64) (held, waiting int64, err error) {
	_, err = tx.row(qLiveCounts, []any{now}, &held, &waiting)
	return held, waiting, err
}

// qQueueOldest reads the first entry of queue_entries_by_time
// (migrations 00007): one index lookup, however many wait.
var qQueueOldest = portable("QueueOldest", `SELECT queued_at FROM queue_entries ORDER BY queued_at LIMIT 1`)

// QueueOldest returns when the client waiting longest, in any queue, was
// queued; found is false when nobody waits. For the metrics' gauge of the
// oldest wait.
func QueueOldest(tx *Tx) (queuedAt int64, found bool, err error) {
	return tx.rowInt(qQueueOldest)
}
