package repo

// Reads sent ahead (PostgreSQL). A group's first round trip is BEGIN and
// the service row's lock (ServiceRowLock); its operation's first read, the
// request's state, went out in a second one. An operation whose first read
// is known before it runs (an acquire's, from its request alone: Warm) has
// that read go in the first round trip too, after the lock, and its rows
// kept. When the operation then asks for that very read, and the
// transaction has run nothing in between, it gets the rows kept: the same
// rows, since the read ran under the same lock, at READ COMMITTED, with no
// write of this transaction after it. Any statement the transaction runs
// first (a lapse that retires leases, a pruning, a different read) drops
// them, and the read goes out as it would have.

import (
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Warm is a batch of reads that an operation will make first, to be sent
// ahead with the transaction's first round trip. The zero Warm has none.
type Warm struct{ reads []read }

// WarmRequestState is the read of RequestStateGet, or, with withNext, of
// RequestStateWithNext with keep and limit, for client and lock.
func WarmRequestState(client, lock string, withNext bool, keep int64, limit int) Warm {
	rs := []read{{q: qRequestStateGet, args: []any{client, lock}}}
	if withNext {
		rs = append(rs, read{q: qNextPredecessors, args: []any{lock, keep, limit}})
	}
	return Warm{reads: rs}
}

// kept are the rows of reads sent ahead, as the database sent them.
type kept struct {
	reads   []read
	results []keptRows
}

type keptRows struct {
	types  *pgtype.Map
	fields []pgconn.FieldDescription
	rows   [][][]byte
}

// read is r as a read of a batch whose rows are kept in k, not scanned.
func (k *keptRows) read(r read) read {
	r.fn, r.keep = nil, k
	return r
}

// keepAll copies the rows of a read sent ahead from the batch.
func keepAll(br pgx.BatchResults, k *keptRows, types *pgtype.Map) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	// The writer's connection's types, used after the batch to scan the
	// rows kept: the connection is pinned to the DB and used by one
	// transaction at a time.
	k.types = types
	k.fields = append([]pgconn.FieldDescription(nil), rows.FieldDescriptions()...)
	for rows.Next() {
		var row [][]byte
		for _, v := range rows.RawValues() {
			if v != nil {
				v = append([]byte{}, v...)
			}
			row = append(row, v)
		}
		k.rows = append(k.rows, row)
	}
	return rows.Err()
}

// takeKept answers rs from the rows kept, if they are the reads sent ahead
// and nothing ran since, and reports whether it did. Either way the rows
// kept are dropped: they are good for the transaction's next statement
// only.
func (tx *Tx) takeKept(rs []read) (bool, error) {
	k := tx.kept
	tx.kept = nil
	if k == nil || len(k.reads) != len(rs) {
		return false, nil
	}
	for i, r := range rs {
		if r.q != k.reads[i].q || !reflect.DeepEqual(r.args, k.reads[i].args) {
			return false, nil
		}
	}
	for i, r := range rs {
		res := k.results[i]
		for _, row := range res.rows {
			scan := func(dest ...any) error {
				err := pgx.ScanRow(res.types, res.fields, row, dest...)
				tx.decode(dest...)
				return err
			}
			if err := r.fn(scan); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}
