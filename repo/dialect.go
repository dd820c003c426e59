package repo

import (
	"time"

	"github.com/jmoiron/sqlx"
)

// dialect is what differs between SQLite and PostgreSQL: the syntax of
// parameters, the few statements that cannot be written once for both, and
// what is the connection's rather than SQL's (whether servers share the
// database, what a failed statement means, how text is stored). Everything
// else is written once, in SQLite's syntax, and registered with portable
// (statements.go). Open picks the dialect of its database, once; each
// dialect is one empty type (dialect_sqlite.go, dialect_postgres.go), and
// nothing else in the package asks which one it has.
//
// A method that gives a statement returns "" when that database never runs
// it; Tx then refuses it, and a caller that has another way (LockGrant)
// asks Tx.has first.
type dialect interface {
	// String names the database, for messages.
	String() string

	// bind renders the parameters ps of text, as scanParams found them,
	// in the database's syntax.
	bind(text string, ps []param) string
	// byteCollation is the collation that orders text byte by byte, given to
	// parameters compared with the name columns (WaitEdgesFrom).
	byteCollation() string

	// begin starts a write transaction.
	begin() string
	// serviceCounters reads the service row: clock, registration counter.
	serviceCounters() string
	// lockGrant advances a lock's counter (creates the lock, for newLock)
	// and inserts the lease in one statement, parameters as LeaseInsert's.
	lockGrant(newLock bool) string
	// leaseRenew is LeaseRenew in one statement (parameters expires_at,
	// lock, client), returning token and granted_at.
	leaseRenew() string
	// leaseEnd is LeaseEnd in one statement (parameters lock, client,
	// ended, ended_at), the ended grant's row included, returning the lease's mode, token, granted_at and
	// expires_at, and the lock's queue length.
	leaseEnd() string
	// lockServiceRow reads the service row as serviceCounters and locks it
	// until the transaction ends.
	lockServiceRow() string
	// clock reads the database's clock in Unix seconds.
	clock() string
	// notify queues ?2 for the listeners of channel ?1.
	notify() string
	// currentSchema names the schema the connection works in.
	currentSchema() string
	// listen subscribes to channel. Not a registered statement: a channel
	// is an identifier, which no parameter can stand for; the test
	// prepares it for a channel of every length.
	listen(channel string) string
	// backupVersion and backupInto are Backup's: the latest migration
	// applied, and a copy of the database into the file ?.
	backupVersion() string
	backupInto() string
	// readBegin starts a read apart (read.go): one snapshot, no lock.
	readBegin() string
	// notifyEventID is notify (?1, ?2) that also writes ?3 as the service
	// row's event counter, in one round trip.
	notifyEventID() string
	// indexedBy is the hint that makes the planner read a table through
	// index, where the database takes one (SQLite, which would otherwise
	// pick the primary key for some ranges); "" elsewhere.
	indexedBy(index string) string

	// pipelines reports whether a transaction's writes wait for its next
	// read, to go with it in one round trip (pipeline.go).
	pipelines() bool
	// peers reports whether several servers may share the database, each
	// transaction taking the service row's lock first (ServiceRowLock);
	// then nothing read in one transaction may be trusted in the next.
	peers() bool
	// failed maps a statement's error: the database's absence (a lost
	// connection, a failover, a timeout, a full disk) to lk.ErrUnavailable,
	// anything else as it is. suspect: the connection may be gone, for the
	// next Begin to check; replace: it works but is the wrong one (a
	// standby), for the next Begin to replace.
	failed(err error) (mapped error, suspect, replace bool)
	// escapesText reports whether strings must be escaped on their way in
	// and out (postgres.go: PostgreSQL's text cannot hold the byte 0).
	escapesText() bool
	// readDeadline bounds a read apart; 0 for none (a file does not stall
	// as a network does).
	readDeadline() time.Duration
	// pagesRead returns how many pages conn's statements have read
	// (PagesRead); 0 where the database does not count them.
	pagesRead(conn *sqlx.Conn) (int64, error)
	// checkpoint writes what committed into the database's main file,
	// outside any transaction (Checkpoint); "" where a commit already has.
	checkpoint() string
}

var (
	_ dialect = sqliteDialect{}
	_ dialect = postgresDialect{}
)

// The statements whose whole text is the dialect's. (WaitEdgesFrom and
// WaitEdgesBeforeQueueing, in waits.go, take only the collation from it.)
var (
	qBegin              = perDialect("Begin", dialect.begin)
	qServiceCounters    = perDialect("ServiceCounters", dialect.serviceCounters)
	qLockGrantNewLock   = perDialect("LockGrant.new-lock", func(d dialect) string { return d.lockGrant(true) })
	qLockGrantTakeToken = perDialect("LockGrant.take-token", func(d dialect) string { return d.lockGrant(false) })
	qLockServiceRow     = perDialect("Lock.service-row", dialect.lockServiceRow)
	qLockClock          = perDialect("Lock.clock", dialect.clock)
	qNotify             = perDialect("Notify", dialect.notify)
	qCurrentSchema      = perDialect("Open.current-schema", dialect.currentSchema)
	qBackupVersion      = perDialect("Backup.version", dialect.backupVersion)
	qBackupInto         = perDialect("Backup.into", dialect.backupInto)
	qReadBegin          = perDialect("Read.begin", dialect.readBegin)
	qNotifyEventID      = perDialect("Notify.event-id", dialect.notifyEventID)
	qCheckpoint         = perDialect("Checkpoint", dialect.checkpoint)
)
