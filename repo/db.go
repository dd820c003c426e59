// Package repo is the store: all of leasekeeper's SQL. Each table's
// statements are in one file named after it (service.go, locks.go,
// clients.go, leases.go, queue.go, store.go, grants.go, and the aborts
// table in explain.go); the reads that join several have files of their
// own, by who needs them: views.go (the contract's inspect and status),
// waits.go (the wait-for graph), read.go (reads apart from the writer),
// console.go and explain.go. Every function takes the transaction handle
// *Tx and, when it needs time, "now" as an argument; none reads a clock.
// The rules that decide which function to call live in package service.
//
// Every statement is declared once, at package level, in a registry
// (statements.go), and Tx runs only registered statements. Most are written
// once for SQLite and PostgreSQL (portable); what differs is the dialect's
// (dialect.go), which Open picks once.
//
// Its API is not stable: it is leasekeeper's implementation.
package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/leasekeeper/leasekeeper/migrations"
)

func init() {
	// sqlx does not know modernc's driver name.
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// MemoryPath opens a private in-memory database.
const MemoryPath = ":memory:"

// DB is one open leasekeeper database, SQLite or PostgreSQL. It drives a
// single pinned connection: statements (BEGIN and COMMIT included, on SQLite)
// are prepared once on it, which is the largest saving SQLite offers here
// (docs/performance.md). A DB is not safe for concurrent use; package service
// serializes access to it. Several processes may share one PostgreSQL
// database: see HasPeers and ServiceRowLock.
type DB struct {
	db      *sqlx.DB
	conn    *sqlx.Conn
	dialect dialect
	texts   []string        // every registered statement's text for dialect, by statement
	pure    []bool          // which of them change nothing (warm.go)
	pgcfg   *pgx.ConnConfig // PostgreSQL only: for Listen's own connection
	// lockTimeout: PostgreSQL only, whether the writer's connection gets
	// ServiceLockTimeout (false when the URL sets lock_timeout).
	lockTimeout bool
	// channel is the notification channel of this database's servers.
	// Channels are per database, not per schema: the name is the schema's,
	// so that deployments in two schemas of one database never hear each
	// other.
	channel string
	// suspect: a statement failed, so the connection may be gone; the next
	// Begin checks it and, if so, takes a new one (PostgreSQL only: a
	// SQLite connection is a file handle).
	suspect bool
	// replace: the connection works but is the wrong one (it reached a
	// standby): the next Begin takes another whatever a ping says.
	replace bool
	trips   *roundTrips                   // PostgreSQL's writer: its round trips (pipeline.go)
	stmts   []*sqlx.Stmt                  // by statement; nil until first run
	stats   map[statement]*StatementStats // nil unless CollectStats was called
	lock    *fileLock                     // a SQLite file's, held while open (lockfile.go)
	reads   *readPool                     // connections apart from the writer's (read.go); nil in memory
	ends    *endsCache                    // a SQLite writer's (ends.go); nil elsewhere
}

// newDB makes the DB of the connection conn of sdb, a database of dialect d.
func newDB(sdb *sqlx.DB, conn *sqlx.Conn, d dialect) (*DB, error) {
	texts, err := render(d)
	if err != nil {
		return nil, err
	}
	return &DB{db: sdb, conn: conn, dialect: d, texts: texts, stmts: make([]*sqlx.Stmt, len(texts)), pure: pureReads(texts)}, nil
}

// IsPostgres reports whether Open takes dsn for a PostgreSQL database: a
// postgres:// or postgresql:// URL. Anything else names a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// HasPeers reports whether other servers may use the database at the same
// time (PostgreSQL). Then nothing read in an earlier transaction can be
// trusted in a later one: a transaction starts with Lock, and a service
// keeps no state between transactions.
func (d *DB) HasPeers() bool { return d.dialect.peers() }

// StatementStats is how often one statement ran and how long it took in all.
type StatementStats struct {
	Query string
	Count int64
	Total time.Duration
}

// CollectStats starts counting every statement's executions and time, for
// finding where an operation's time goes (leasekeeper run --stmt-stats).
func (d *DB) CollectStats() { d.stats = map[statement]*StatementStats{} }

// Stats returns the statements counted since CollectStats, most time first.
func (d *DB) Stats() []StatementStats {
	out := make([]StatementStats, 0, len(d.stats))
	for _, st := range d.stats {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out
}

// track adds one execution of s that began at start.
func (d *DB) track(s statement, start time.Time) {
	st := d.stats[s]
	if st == nil {
		st = &StatementStats{Query: strings.Join(strings.Fields(d.texts[s]), " ")}
		d.stats[s] = st
	}
	st.Count++
	st.Total += time.Since(start)
}

// Options tune how a database file is opened.
type Options struct {
	// Synchronous is SQLite's synchronous setting for a file ("NORMAL" when
	// empty). In-memory databases ignore it.
	Synchronous string
	// Warn, when set, is told what Open could not do and did without (the
	// WAL written ahead: walsize.go).
	Warn func(msg string, args ...any)
}

// Open opens the database at path and applies the embedded migrations: a
// PostgreSQL database for a postgres:// URL (IsPostgres), else the SQLite file
// at path (created if needed, 0600), or a private in-memory one for MemoryPath.
//
// A SQLite file is opened by one DB at a time, in this process or any
// other: Open holds the lock file beside it (path+LockSuffix) and a flock
// on the file itself (so a hard link is no way around it) until Close, and
// answers *InUseError while another DB holds either (lockfile.go). Errors
// name the path and the likely cause (openerr.go).
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if IsPostgres(path) {
		d, err := openPostgres(ctx, path)
		if err == nil {
			d.reads = postgresReads(d)
		}
		return d, err
	}
	if path == MemoryPath {
		d, err := openSQLite(ctx, path, opts)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		return d, nil
	}
	lock, err := lockDatabase(path)
	if err != nil {
		return nil, err
	}
	// Before prepareFile, which opens the file: see checkGuarded.
	if err := checkGuarded(path); err != nil {
		lock.release()
		return nil, err
	}
	if err := prepareFile(path); err != nil {
		lock.release()
		return nil, err
	}
	if err := lock.guardFile(path); err != nil {
		lock.release()
		return nil, err
	}
	d, err := openSQLite(ctx, path, opts)
	if err != nil {
		lock.release()
		return nil, openError(path, err)
	}
	d.lock = lock
	if syncsEachCommit(opts.Synchronous) {
		// Not fatal: without the zeros, SQLite grows the WAL as it always
		// did, and only the syncs of its first fill cost more.
		if err := d.growWAL(ctx); err != nil && opts.Warn != nil {
			opts.Warn("the WAL was not written ahead: the commits of its first fill sync more slowly", "database", path, "err", err)
		}
	}
	d.reads = sqliteReads(d, path)
	return d, nil
}

// walAutocheckpoint is the writer's wal_autocheckpoint, in pages.
const walAutocheckpoint = 10000

// openSQLite opens the SQLite database at path, a file or MemoryPath.
func openSQLite(ctx context.Context, path string, opts Options) (*DB, error) {
	dsn := "file::memory:"
	if path != MemoryPath {
		sync := opts.Synchronous
		if sync == "" {
			sync = "NORMAL"
		}
		// wal_autocheckpoint: the writer copies the WAL into the file (and
		// syncs the file) once the WAL holds 10,000 pages (40 MiB), not
		// SQLite's 1,000. An operation dirties a few pages of the history's
		// indexes, and a checkpoint every 20 groups or so cost 5 % of the
		// pairs per second at 64 clients (docs/performance.md, "SQLite: a
		// checkpoint every 10,000 pages"); the sync at each commit is
		// unchanged, and so is what a crash can lose.
		dsn = "file:" + escapePath(path) + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)" +
			"&_pragma=wal_autocheckpoint(" + strconv.Itoa(walAutocheckpoint) + ")&_pragma=synchronous(" + sync + ")"
	}
	sdb, err := sqlx.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	// One connection: an in-memory database exists per connection, and a file
	// has a single writer anyway.
	sdb.SetMaxOpenConns(1)
	p, err := goose.NewProvider(goose.DialectSQLite3, sdb.DB, migrations.SQLite())
	if err == nil {
		err = migrate(ctx, p)
	}
	if err != nil {
		sdb.Close()
		return nil, err
	}
	conn, err := sdb.Connx(ctx)
	if err == nil {
		var d *DB
		if d, err = newDB(sdb, conn, sqliteDialect{}); err == nil {
			d.ends = newEndsCache() // the writer's: this connection's
			return d, nil
		}
		conn.Close()
	}
	sdb.Close()
	return nil, err
}

// escapePath keeps a file name with '?' or '#' from being read as URI syntax.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// ErrNewerSchema is Open's refusal of a database that a newer version of
// leasekeeper migrated past the migrations this one embeds.
var ErrNewerSchema = errors.New("the database was migrated by a newer leasekeeper")

// migrate applies the embedded migrations the database lacks, and refuses
// one that is past them: its tables and indexes are a newer version's,
// which this version's statements may not fit (migration 00014 made an
// index partial, which an older binary's INDEXED BY cannot use on SQLite:
// it served every explained grant with an internal error). goose itself
// ignores versions it does not know.
func migrate(ctx context.Context, p *goose.Provider) error {
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	current, known, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if current > known {
		return fmt.Errorf("%w: it is at migration %d, and this version knows migrations up to %d; "+
			"run the version that migrated it, or a newer one, or restore a backup taken before (docs/deployment.md, \"Upgrades\")", ErrNewerSchema, current, known)
	}
	return nil
}

// Close releases the prepared statements and closes the database.
func (d *DB) Close() error {
	d.reads.close()
	d.closeStmts()
	d.conn.Close()
	err := d.db.Close()
	// Only once SQLite has let go of the file may another DB open it.
	if lerr := d.lock.release(); err == nil {
		err = lerr
	}
	return err
}

// closeStmts releases the prepared statements; each is prepared again when
// next run.
func (d *DB) closeStmts() {
	for i, s := range d.stmts {
		if s != nil {
			s.Close()
			d.stmts[i] = nil
		}
	}
}

// The storage failures, beside lk.ErrUnavailable in a failed statement's
// error (dialect.failed): the database itself cannot take writes, not a
// lock wait or a conflict that the next attempt may pass.
var (
	// ErrDiskFull: SQLite could not write its files (a full disk, a file
	// size limit, an I/O error).
	ErrDiskFull = errors.New("the database file cannot be written")
	// ErrDatabaseDown: PostgreSQL is out of reach, or refuses writes (a
	// lost connection, a server shutting down, a read-only standby).
	ErrDatabaseDown = errors.New("the database is out of reach or refuses writes")
)

// Checkpoint writes what committed into the database's main file, outside
// any transaction: on SQLite the WAL's pages, without waiting for readers
// (a write that reaches the file itself, which a commit into the WAL's free
// room does not prove); on PostgreSQL nothing, as a commit already is.
func (d *DB) Checkpoint(ctx context.Context) error {
	if d.texts[qCheckpoint] == "" {
		return nil
	}
	_, err := (&Tx{d: d, ctx: ctx}).exec(qCheckpoint)
	return err
}

// Tx is an open transaction on a DB: the handle every repo function takes.
type Tx struct {
	d   *DB
	ctx context.Context
	// pending are the writes not sent yet, BEGIN first until the first
	// read, where the database pipelines (pipeline.go).
	pending []queued
	// ahead are reads to go with the next batch, and kept the rows of
	// those sent, until taken or dropped (warm.go).
	ahead []*warm
	kept  []*kept
}

// Begin starts a write transaction. On SQLite it takes the write lock at
// once (BEGIN IMMEDIATE), so a transaction never fails half-way for want of
// it. On PostgreSQL the caller takes the equivalent lock with
// ServiceRowLock, with which BEGIN goes out (pipeline.go), and a
// connection lost meanwhile is replaced first.
func (d *DB) Begin(ctx context.Context) (*Tx, error) {
	tx := &Tx{d: d, ctx: ctx}
	if err := d.recover(ctx); err != nil {
		return nil, err
	}
	if err := tx.write(qBegin); err != nil {
		return nil, err
	}
	return tx, nil
}

var (
	qCommit   = portable("Commit", `COMMIT`)
	qRollback = portable("Rollback", `ROLLBACK`)
)

// Commit makes the transaction's changes durable (as the synchronous
// setting allows); where the database pipelines, the writes not sent yet go
// with it.
func (tx *Tx) Commit() error {
	clear(tx.ahead) // nobody will ask for them
	tx.ahead = tx.ahead[:0]
	err := tx.write(qCommit)
	if err == nil {
		err = tx.flush()
	}
	if err != nil {
		tx.d.ends.reset() // committed or not, it is not known which
	}
	return err
}

// Rollback undoes the transaction. The writes not sent yet are dropped;
// a transaction whose BEGIN was never sent has nothing to undo.
func (tx *Tx) Rollback() error {
	tx.d.ends.reset()
	neverBegun := len(tx.pending) > 0 && tx.pending[0].q == qBegin
	tx.pending = tx.pending[:0]
	if neverBegun {
		return nil
	}
	_, err := tx.exec(qRollback)
	return err
}

// has reports whether the database's dialect has statement s.
func (tx *Tx) has(s statement) bool { return tx.d.texts[s] != "" }

// prepared returns statement s, prepared once per connection.
func (tx *Tx) prepared(s statement) (*sqlx.Stmt, error) {
	if p := tx.d.stmts[s]; p != nil {
		return p, nil
	}
	q := tx.d.texts[s]
	if q == "" {
		return nil, fmt.Errorf("statement %s: %s has none", s, tx.d.dialect)
	}
	// Prepared with the transaction's context: a statement outlives it, and
	// a context kept from Open would be cancelled long before the database.
	p, err := tx.d.conn.PreparexContext(tx.ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare %s %q: %w", s, q, tx.d.failed(err))
	}
	tx.d.stmts[s] = p
	return p, nil
}

func (tx *Tx) exec(q statement, args ...any) (sql.Result, error) {
	if err := tx.flush(); err != nil {
		return nil, err
	}
	tx.invalidate(q, args)
	s, err := tx.prepared(q)
	if err != nil {
		return nil, err
	}
	if tx.d.stats != nil {
		defer tx.d.track(q, time.Now())
	}
	res, err := s.ExecContext(tx.ctx, tx.encode(args)...)
	return res, tx.d.failed(err)
}

// row runs a query expected to return at most one row and scans it into dest.
// It reports found=false, not an error, when there is no row: sql.ErrNoRows is
// mapped here and nowhere else.
func (tx *Tx) row(q statement, args []any, dest ...any) (bool, error) {
	if len(tx.pending) > 0 {
		var found bool
		return found, tx.batch(readRow(q, args, &found, dest...))
	}
	tx.invalidate(q, args)
	s, err := tx.prepared(q)
	if err != nil {
		return false, err
	}
	if tx.d.stats != nil {
		defer tx.d.track(q, time.Now())
	}
	err = s.QueryRowContext(tx.ctx, tx.encode(args)...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	tx.decode(dest...)
	return err == nil, tx.d.failed(err)
}

// rowInt is row for a single integer column.
func (tx *Tx) rowInt(q statement, args ...any) (v int64, found bool, err error) {
	found, err = tx.row(q, args, &v)
	return v, found, err
}

// each runs q and calls fn once per row with a function that scans it.
func (tx *Tx) each(q statement, args []any, fn func(scan func(...any) error) error) error {
	if len(tx.pending) > 0 {
		return tx.batch(read{q: q, args: args, fn: fn})
	}
	tx.invalidate(q, args)
	s, err := tx.prepared(q)
	if err != nil {
		return err
	}
	if tx.d.stats != nil {
		defer tx.d.track(q, time.Now())
	}
	rows, err := s.QueryContext(tx.ctx, tx.encode(args)...)
	if err != nil {
		return tx.d.failed(err)
	}
	defer rows.Close()
	scan := func(dest ...any) error {
		err := rows.Scan(dest...)
		tx.decode(dest...)
		return err
	}
	for rows.Next() {
		if err := fn(scan); err != nil {
			return tx.d.failed(err)
		}
	}
	return tx.d.failed(rows.Err())
}

// selectAll runs q and scans every row into the slice dest points to.
func (tx *Tx) selectAll(dest any, q statement, args ...any) error {
	if err := tx.flush(); err != nil {
		return err
	}
	tx.invalidate(q, args)
	s, err := tx.prepared(q)
	if err != nil {
		return err
	}
	if tx.d.stats != nil {
		defer tx.d.track(q, time.Now())
	}
	err = s.SelectContext(tx.ctx, dest, tx.encode(args)...)
	tx.decode(dest)
	return tx.d.failed(err)
}

// affected runs a statement and reports how many rows it changed.
func (tx *Tx) affected(q statement, args ...any) (int64, error) {
	res, err := tx.exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Redacted is dsn as messages show it: a PostgreSQL URL without its
// password, a file's path as it is.
func Redacted(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "the PostgreSQL database"
	}
	return u.Redacted()
}
