package repo

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Pipelining (PostgreSQL: dialect.pipelines). On a database across a
// network a statement costs a round trip, which is most of an operation's
// time there, while the servers wait for the service row's lock. So a
// write transaction sends no write alone: a write whose result nobody
// reads (Tx.write) is queued, and the queue goes out with the
// transaction's next read, or its COMMIT, as one pgx batch: one round trip
// for all of them. BEGIN itself waits for the first read. The statements
// run in the order they were queued, so a read sees every write before it;
// a write that fails fails its batch, and the transaction with it (a failed
// statement aborts a PostgreSQL transaction anyway: the operations of a
// group have no savepoints, and the group fails whole).
//
// Reads that go together (the service row's lock, the clock, the earliest
// expiry at a transaction's start; a request's state and its would-be
// predecessors) go in one batch too (Tx.reads).
//
// The round trips of the writer's connection are counted (RoundTrips), at
// the pgx layer, where a batch is one: what docs/performance.md measures.

// queued is a write of the transaction not sent yet.
type queued struct {
	q    statement
	args []any
}

// write runs a statement whose result nobody reads: at once, or, where the
// database pipelines, with the transaction's next read or its COMMIT.
func (tx *Tx) write(q statement, args ...any) error {
	tx.invalidate(q, args)
	return tx.writeKnown(q, args...)
}

// writeKnown is write once the rows kept that q changes are dropped.
func (tx *Tx) writeKnown(q statement, args ...any) error {
	if tx.d.dialect.pipelines() {
		if tx.d.texts[q] == "" {
			return errors.New("statement " + q.String() + ": " + tx.d.dialect.String() + " has none")
		}
		tx.pending = append(tx.pending, queued{q: q, args: tx.encode(args)})
		return nil
	}
	_, err := tx.exec(q, args...)
	return err
}

// read is one read of a batch: q with args, whose rows scan calls fn for.
type read struct {
	q    statement
	args []any
	fn   func(scan func(...any) error) error
	keep *keptRows // a read sent ahead: its rows are kept, not scanned (warm.go)
}

// readRow is a read of one row into dest; found reports whether there was
// one.
func readRow(q statement, args []any, found *bool, dest ...any) read {
	return read{q: q, args: args, fn: func(scan func(...any) error) error {
		*found = true
		return scan(dest...)
	}}
}

// reads runs rs, after the queued writes: in one batch where the database
// pipelines, one by one elsewhere.
func (tx *Tx) reads(rs ...read) error {
	if ok, err := tx.takeKept(rs); ok {
		return err
	}
	if !tx.d.dialect.pipelines() {
		for _, r := range rs {
			if err := tx.each(r.q, r.args, r.fn); err != nil {
				return err
			}
		}
		return nil
	}
	return tx.batch(rs...)
}

// flush sends the queued writes, if any: before a read that goes through
// database/sql, which cannot join a batch.
func (tx *Tx) flush() error {
	if len(tx.pending) == 0 {
		return nil
	}
	return tx.batch()
}

// batch sends the queued writes, rs and the reads ahead as one pgx batch,
// scans rs's rows and keeps the others'.
func (tx *Tx) batch(rs ...read) error {
	for _, r := range rs {
		tx.invalidate(r.q, r.args)
	}
	pending := tx.pending
	tx.pending = tx.pending[:0]
	var ks []*kept
	rs = rs[:len(rs):len(rs)] // the caller's array stays as it is
	for _, w := range tx.ahead {
		k := &kept{w: w, results: make([]keptRows, len(w.reads))}
		for i, r := range w.reads {
			rs = append(rs, k.results[i].read(r))
		}
		ks = append(ks, k)
	}
	clear(tx.ahead)
	tx.ahead = tx.ahead[:0]
	if tx.d.stats != nil {
		for _, r := range rs {
			defer tx.d.track(r.q, time.Now())
		}
	}
	err := tx.d.conn.Raw(func(dc any) error {
		conn := dc.(*stdlib.Conn).Conn()
		b := &pgx.Batch{}
		for _, p := range pending {
			b.Queue(tx.d.texts[p.q], p.args...)
		}
		for _, r := range rs {
			b.Queue(tx.d.texts[r.q], tx.encode(r.args)...)
		}
		br := conn.SendBatch(tx.ctx, b)
		for range pending {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		for _, r := range rs {
			if r.keep != nil {
				if err := keepAll(br, r.keep, conn.TypeMap()); err != nil {
					br.Close()
					return err
				}
				continue
			}
			if err := scanAll(tx, br, r); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
	if err == nil {
		tx.kept = append(tx.kept, ks...)
	}
	return tx.d.failed(err)
}

// scanAll reads r's rows from the batch.
func scanAll(tx *Tx, br pgx.BatchResults, r read) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	scan := func(dest ...any) error {
		err := rows.Scan(dest...)
		tx.decode(dest...)
		return err
	}
	for rows.Next() {
		if err := r.fn(scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// roundTrips counts the round trips of a connection at the pgx layer: a
// query, a prepare, or a whole batch is one.
type roundTrips struct{ n atomic.Int64 }

var (
	_ pgx.QueryTracer   = (*roundTrips)(nil)
	_ pgx.BatchTracer   = (*roundTrips)(nil)
	_ pgx.PrepareTracer = (*roundTrips)(nil)
)

func (t *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (t *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// RoundTrips returns how many round trips the writer's connection has made
// to the database since it opened; 0 on SQLite, which has none.
func (d *DB) RoundTrips() int64 {
	if d.trips == nil {
		return 0
	}
	return d.trips.n.Load()
}
