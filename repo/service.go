package repo

import (
	"database/sql"
	"errors"
	"math"

	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// Counters are the service row: the clock and the registration counter.
type Counters struct {
	Clock         int64
	ClockSet      bool // false before the first operation
	LastClientAge int64
	// EventID is the id of the last event a transaction numbered
	// (service.NumberEvents): GET /v1/events.
	EventID int64
	// TokenFloor is where a new lock's counter starts: its first token is
	// TokenFloor + 1. 0 but after a rollback was accepted, which raises it
	// past every token issued (RaiseTokens): the locks the lost
	// transactions created are gone with them, their tokens not.
	TokenFloor int64
}

// ServiceCounters reads the service row; LastClientAge is the registration
// counter, the larger of the stored value and the youngest registered age.
// On PostgreSQL the stored value is exact (on a database with peers, each service writes
// the row whenever it changes), so the clients table is not read (the
// dialects' serviceCounters).
func ServiceCounters(tx *Tx) (Counters, error) {
	var c Counters
	var clock sql.NullInt64
	_, err := tx.row(qServiceCounters, nil, &clock, &c.LastClientAge, &c.EventID, &c.TokenFloor)
	c.Clock, c.ClockSet = clock.Int64, clock.Valid
	return c, err
}

var qServiceCountersSet = portable("ServiceCountersSet", `UPDATE service SET clock = ?, last_client_age = ?, event_id = ? WHERE id = 1`)

// ServiceCountersSet writes the service row, but for the token floor,
// which only RaiseTokens moves.
func ServiceCountersSet(tx *Tx, c Counters) error {
	err := tx.write(qServiceCountersSet, c.Clock, c.LastClientAge, c.EventID)
	return err
}

// Locked is what a transaction on a database with peers reads first, under
// the service row's lock (ServiceRowLock).
type Locked struct {
	Counters
	// DBNow is the database's clock, in Unix seconds with a fraction.
	DBNow float64
	// EarliestExpiry is the smallest expires_at of all leases,
	// math.MaxInt64 when there are none: whether anything can have lapsed.
	EarliestExpiry int64
}

// ServiceRowLock takes the service row's lock on a database with peers
// (PostgreSQL), first thing in a transaction, and returns the row, the
// database's clock and the earliest expiry, in one round trip with the
// BEGIN (pipeline.go), and with them the reads ahead, whose rows the
// transaction's next statement may take (warm.go).
//
// Every transaction of every server takes this one row lock before it reads
// anything else, so transactions on the database run one at a time, in the
// order they got the lock, and each (at READ COMMITTED, whose every
// statement reads the latest committed state) sees everything committed
// before it: as if a single process ran them all. The stored counters are
// exact on a database with peers: each service writes them whenever they change.
//
// Time comes from the database's clock, so servers whose own clocks disagree
// still agree on it, and it is read once the lock is held: a statement's
// expressions may be computed before it waits for a row, so the lock's own
// statement could return a time as old as that wait; the statements of a
// batch run one after the other. The caller never lets it fall behind the
// stored clock.
func ServiceRowLock(tx *Tx, ahead ...Warm) (Locked, error) {
	var l Locked
	var clock, earliest sql.NullInt64
	q := qLockServiceRow
	if failpoint.Enabled(failpoint.SkipServiceLock) {
		q = qServiceCounters // the fault: the row is read, not locked
	}
	var found bool
	rs := []read{readRow(q, nil, &found, &clock, &l.LastClientAge, &l.EventID, &l.TokenFloor),
		readRow(qLockClock, nil, &found, &l.DBNow),
		readRow(qLeasesEarliestExpiry, nil, &found, &earliest)}
	tx.SendAhead(ahead...)
	err := tx.reads(rs...)
	l.Clock, l.ClockSet = clock.Int64, clock.Valid
	l.EarliestExpiry = math.MaxInt64
	if earliest.Valid {
		l.EarliestExpiry = earliest.Int64
	}
	return l, err
}

// DatabaseClock reads the database's clock (Unix seconds, with a
// fraction), in one round trip with the queued writes and the reads ahead
// (warm.go). PostgreSQL only: a group reads it again for the operations
// it takes after its lock (ServiceRowLock's clock is older than they are).
func DatabaseClock(tx *Tx, ahead ...Warm) (float64, error) {
	var now float64
	var found bool
	tx.SendAhead(ahead...)
	err := tx.reads(readRow(qLockClock, nil, &found, &now))
	if err == nil && !found {
		err = errors.New("the database's clock read no row")
	}
	return now, err
}

// Notify queues payload for the database's listeners (DB.Listen), delivered
// if and when the transaction commits. PostgreSQL only.
func Notify(tx *Tx, payload string) error {
	err := tx.write(qNotify, tx.d.channel, payload)
	return err
}

// NotifyEventID is Notify, writing eventID to the service row's event
// counter in the same statement: a transaction that changed nothing else
// of the row need not write it apart, a round trip less. PostgreSQL only,
// as Notify.
func NotifyEventID(tx *Tx, payload string, eventID int64) error {
	err := tx.write(qNotifyEventID, tx.d.channel, payload, eventID)
	return err
}
