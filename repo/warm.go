package repo

// Reads sent ahead (PostgreSQL). An operation's first read is known before
// it runs when it comes from the request alone (an acquire's state: Warm).
// The runtime hands the transaction the first reads of the operations
// about to run (Tx.SendAhead), and they go out with its next batch, after
// whatever that batch carries: a group of acquires reads the states of
// many of them in one round trip, not one each. Their rows are kept, not
// scanned, until the operation asks for that very read (takeKept).
//
// Kept rows must be the rows the read would return when asked. The
// transaction holds the service row's lock, so only its own statements
// change anything, and each statement it runs after a read was sent drops
// the rows kept that it may have changed (Tx.invalidate). The reads sent
// ahead (RequestStateGet, NextPredecessors, LeaseEndAhead) read the rows
// of leases, locks and grants_ended of their lock, and the rows of clients
// and queue_entries of their client, nothing else. So a statement whose
// footprint is declared (footprints: the lock and the client its
// arguments name) must change no row of the first three tables but of its
// lock, and none of the other two but of its client; it drops the rows
// kept of that lock or that client. A pure read drops none (pureReads).
// A statement whose changes are known to its caller alone says so
// (Tx.writeAbout: a hand-over's grants to the lock's waiters). Any other
// statement (a lapse that retires leases, a pruning by age, a deadlock's
// abort) drops them all.

import (
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasekeeper/leasekeeper/internal/failpoint"
)

// Warm is an operation's first reads, to be sent ahead, and the lock and
// client they read and its writes are about. The zero Warm reads nothing
// and names nothing.
type Warm struct{ w *warm }

type warm struct {
	reads        []read
	lock, client string
}

// WarmRequestState is the read of RequestStateGet, or, with withNext, of
// RequestStateWithNext with keep and limit, for client and lock.
func WarmRequestState(client, lock string, withNext bool, keep int64, limit int) Warm {
	rs := []read{{q: qRequestStateGet, args: []any{client, lock}}}
	if withNext {
		rs = append(rs, read{q: qNextPredecessors, args: nextPredecessorsArgs(lock, keep, limit)})
	}
	return Warm{&warm{reads: rs, lock: lock, client: client}}
}

// Key returns the lock and client w names; ok is false for the zero Warm.
func (w Warm) Key() (lock, client string, ok bool) {
	if w.w == nil {
		return "", "", false
	}
	return w.w.lock, w.w.client, true
}

// footprint is where, in a statement's arguments, the lock and the client
// it is about are (-1: none). Every row the statement may change has that
// lock, or that client; a statement that changes nothing has neither.
type footprint struct{ lock, client int }

// footprints are the writes whose rows are known from their arguments:
// those of a grant, a release, a wait and a hand-over. Every other
// statement that is not a pure read (pureReads) drops every read kept.
var footprints = map[statement]footprint{
	qLockGrantTakeToken:       {0, 1}, // the lock's counter and history, its lease for client
	qLockGrantNewLock:         {0, 1},
	qLeaseEndOne:              {0, 1}, // client's lease of lock, the lock's history
	qLeaseInsert:              {0, 1},
	qGrantEnd:                 {0, 2},
	qGrantInsertEnded:         {0, 2},
	qGrantsPruneLock:          {0, -1},
	qLockCreate:               {0, -1},
	qLockTakeToken:            {0, -1},
	qLockEnqueue:              {0, -1},
	qLockDequeue:              {0, -1},
	qQueueGrantThroughCounter: {2, -1},
	qQueueAppend:              {0, 2},  // a waiter's entry: by client
	qQueueTakeClient:          {-1, 0}, // the client's entry
	qClientRegister:           {-1, 1},
}

// pureReads tells, for each statement's text, whether it is a pure read:
// a SELECT, or a WITH whose parts are SELECTs, that inserts, updates and
// deletes nothing (FOR UPDATE locks rows, and changes none). Such a
// statement drops no read kept.
func pureReads(texts []string) []bool {
	pure := make([]bool, len(texts))
	for i, t := range texts {
		u := strings.ToUpper(strings.TrimSpace(t))
		pure[i] = (strings.HasPrefix(u, "SELECT") || strings.HasPrefix(u, "WITH")) &&
			!changes.MatchString(strings.ReplaceAll(u, "FOR UPDATE", ""))
	}
	return pure
}

var changes = regexp.MustCompile(`\b(INSERT|UPDATE|DELETE)\b`)

// writeAbout is write for a statement whose changed rows are those of lock
// and of clients, as its caller knows and its arguments do not tell.
func (tx *Tx) writeAbout(lock string, clients []string, q statement, args ...any) error {
	tx.dropAbout(lock, clients)
	return tx.writeKnown(q, args...)
}

// SendAhead has the first reads of ws go out with the transaction's next
// batch, where the database pipelines, unless they are kept or going
// already. Reads sent and then dropped are sent again when asked.
func (tx *Tx) SendAhead(ws ...Warm) {
	if !tx.d.dialect.pipelines() {
		return
	}
next:
	for _, w := range ws {
		if w.w == nil || len(w.w.reads) == 0 {
			continue
		}
		for _, a := range tx.ahead {
			if a == w.w {
				continue next
			}
		}
		for _, k := range tx.kept {
			if k.w == w.w {
				continue next
			}
		}
		tx.ahead = append(tx.ahead, w.w)
	}
}

// kept are the rows of a Warm's reads, as the database sent them.
type kept struct {
	w       *warm
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

// invalidate drops the rows kept that q with args may change, run after
// them.
func (tx *Tx) invalidate(q statement, args []any) {
	if len(tx.kept) == 0 || failpoint.Enabled(failpoint.WarmSurvivesWrite) {
		return // the fault: rows kept outlive the writes to them
	}
	if tx.d.pure[q] {
		return
	}
	f, known := footprints[q]
	lock, lockNamed := footArg(args, f.lock)
	client, clientNamed := footArg(args, f.client)
	if !known || !lockNamed || !clientNamed {
		// An argument that a footprint names but that is no name (a
		// footprint out of step with its statement) tells nothing of what
		// changed: the rows kept go, as for any unknown write.
		tx.kept = tx.kept[:0]
		return
	}
	var clients []string
	if client != "" {
		clients = []string{client}
	}
	tx.dropAbout(lock, clients)
}

// dropAbout drops the rows kept of reads of lock ("": none) or of one of
// clients.
func (tx *Tx) dropAbout(lock string, clients []string) {
	if failpoint.Enabled(failpoint.WarmSurvivesWrite) {
		return
	}
	ks := tx.kept[:0]
	for _, k := range tx.kept {
		if (lock != "" && k.w.lock == lock) || slices.Contains(clients, k.w.client) {
			continue
		}
		ks = append(ks, k)
	}
	clear(tx.kept[len(ks):])
	tx.kept = ks
}

// footArg is the name at args[i] that a footprint points to: "" and true
// for i < 0 (the footprint names none), false where args[i] is missing,
// not a string, or empty (no lock or client is named "").
func footArg(args []any, i int) (string, bool) {
	if i < 0 {
		return "", true
	}
	if i >= len(args) {
		return "", false
	}
	s, ok := args[i].(string)
	return s, ok && s != ""
}

// takeKept answers rs from the rows kept, if they are a Warm's reads and
// still good, and reports whether it did. The rows are dropped once
// taken.
func (tx *Tx) takeKept(rs []read) (bool, error) {
	var k *kept
	for i, c := range tx.kept {
		if sameReads(c.w.reads, rs) {
			k = c
			tx.kept = append(tx.kept[:i], tx.kept[i+1:]...)
			break
		}
	}
	if k == nil {
		return false, nil
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

// sameReads reports whether a and b are the same statements with the same
// arguments.
func sameReads(a, b []read) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].q != b[i].q || !reflect.DeepEqual(a[i].args, b[i].args) {
			return false
		}
	}
	return true
}
