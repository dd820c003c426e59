// Package fence checks a leasekeeper fencing token inside the job's own
// database transaction, so that a job that stalled past its lease cannot
// overwrite the rows its successor wrote (docs/fencing.md).
//
// A token protects only a store that checks it. leasekeeper's own fenced
// store does; the tables a batch job writes in PostgreSQL, SQLite or
// MySQL/MariaDB do not. This package adds the check there: a small table,
// leasekeeper_fence, keeps for each fenced resource the highest token that
// wrote to it, and Check, run inside the transaction that does the job's
// writes, raises that token to the job's or fails with a *StaleError
// (errors.Is(err, ErrStale)) when a newer token has already written. The
// caller then rolls the transaction back, and none of the stale job's
// writes land. An equal token passes, as in rule L6 of docs/contract.md: a
// job may write in several transactions under one token.
//
//	db, _ := sql.Open("pgx", dsn)
//	_ = fence.Install(ctx, db, fence.Postgres) // once: CREATE TABLE IF NOT EXISTS
//	tok, _ := fence.FromEnv()                  // under `leasekeeper exec`
//	err := fence.InTx(ctx, db, fence.Postgres, tok, "warehouse.orders", func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `INSERT INTO orders ...`)
//		return err
//	})
//	if errors.Is(err, fence.ErrStale) {
//		// a successor has written: this job's lease is gone, stop
//	}
//
// A row's key is the issuing service's identity, the lock and the
// resource. The identity (GET /v1/health's service_id) is created with the
// leasekeeper database: a recreated or restored one starts its tokens again
// from 1 under a new identity, and so gets rows of its own rather than
// being refused as stale for ever.
//
// The check holds against a concurrent newer writer at each dialect's
// default isolation level: READ COMMITTED on PostgreSQL, REPEATABLE READ on
// MySQL/MariaDB, SQLite's serialized writers. What each dialect needs, and
// what it cannot protect, is in docs/fencing.md; in short:
//   - PostgreSQL: the check is one INSERT ... ON CONFLICT DO UPDATE ...
//     WHERE ... RETURNING, which waits for a concurrent writer's row lock
//     and then re-checks the newest row. At REPEATABLE READ or
//     SERIALIZABLE, PostgreSQL answers a race with a serialization failure
//     (SQLSTATE 40001) instead: Check returns it, InTx retries.
//   - MySQL/MariaDB: INSERT ... ON DUPLICATE KEY UPDATE, then the row read
//     back with SELECT ... FOR UPDATE (a plain SELECT reads an old snapshot).
//     An insert of a new key can deadlock (error 1213), which rolls back the
//     whole transaction: Check returns it, InTx retries. DDL commits
//     implicitly and MyISAM tables ignore a rollback: neither may be among
//     the fenced writes.
//   - SQLite: the check must take the write lock before the transaction has
//     read anything, so that a loser waits (busy_timeout) rather than fails
//     with SQLITE_BUSY: open the database with _txlock=immediate, or make
//     Check the transaction's first statement, as InTx does. Check sets a
//     busy timeout of DefaultBusyTimeout on a connection that has none.
//
// The package uses database/sql only: the caller brings the driver
// (pgx's stdlib, modernc.org/sqlite or mattn's, go-sql-driver/mysql).
package fence
