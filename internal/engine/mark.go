package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/leasekeeper/leasekeeper/service"
)

// The high-water mark: a database that goes back in time is noticed.
//
// SQLite accepts a database that lost its last transactions silently: a
// -wal moved aside after a kill -9, an old copy restored. So does
// PostgreSQL after a point-in-time restore or a failover to an
// asynchronous standby. The server then issues again tokens it has issued
// (issue 20: highest_token=995 after 1,006, the audit log at 1,009, and
// token 996 granted a second time), event ids readers have seen, client
// ages. So a server keeps, in a small file outside the database, two
// records of its counters: what it has seen committed, and a reservation
// ahead of it.
//
//   - seen is written after every commit, without a sync: a write to the
//     page cache, which a killed process cannot lose. At start a database
//     behind it has gone back, and the server refuses to start.
//   - reserved is a ceiling on every token, event id and client age any
//     transaction may carry: it is synced before a transaction that
//     crosses it commits (before its audit lines too), and then moves a
//     block ahead. A sync per markBlock values, not per group. It is what
//     --accept-rollback moves the counters past: beyond every token
//     issued, even those a power cut took from seen.
//
// The record is one small write at offset 0 of a file padded to markSize,
// under a disk sector: it is replaced whole or not at all.

// markBlock is how far ahead reserved runs: a sync per markBlock tokens
// (the highest over all locks), event ids or client ages.
const markBlock = 4096

// markSize is the file's fixed length; the JSON record is padded to it.
const markSize = 512

// MarkSuffix is appended to a SQLite database's path to name its mark
// file, where serve keeps it by default.
const MarkSuffix = ".mark"

// markCounters are the figures a mark keeps. Clock is the service's time:
// not reserved ahead (time moves on by itself), only seen.
type markCounters struct {
	Token     int64 `json:"token"`
	EventID   int64 `json:"event_id"`
	ClientAge int64 `json:"client_age"`
	Clock     int64 `json:"clock"`
}

type markRecord struct {
	Version  int          `json:"v"`
	Seen     markCounters `json:"seen"`
	Reserved markCounters `json:"reserved"`
}

// mark is an open mark file. Its methods run with the runner locked.
type mark struct {
	f    *os.File
	path string
	rec  markRecord
	buf  []byte
	// syncs counts the record's syncs, for the test that a commit pays
	// none but when a block is crossed.
	syncs int
}

// RollbackError is Open's answer for a database that is behind its mark.
type RollbackError struct {
	Mark   string   // the mark file
	Behind []string // what went back: "highest token 995, the mark has seen 1006"
}

func (e *RollbackError) Error() string {
	return fmt.Sprintf("the database went back in time: %s (by the high-water mark %s). "+
		"Its last transactions are lost: a -wal file lost or moved after a crash, a backup restored, "+
		"or on PostgreSQL a point-in-time restore or a failover to an asynchronous standby. "+
		"Serving it as it is would issue again tokens already issued. "+
		"To accept it, start once with serve --accept-rollback: every token, event id and client age then moves past the mark (docs/operations.md)",
		strings.Join(e.Behind, "; "), e.Mark)
}

// openMark opens (creating if missing) the mark file at path.
func openMark(path string) (*mark, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("high-water mark %s: %w", path, err)
	}
	m := &mark{f: f, path: path, buf: make([]byte, markSize)}
	b := make([]byte, markSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, false, fmt.Errorf("high-water mark %s: %w", path, err)
	}
	b = bytes.TrimRight(b[:n], " \n\x00")
	if len(b) == 0 {
		return m, false, nil // new
	}
	if err := json.Unmarshal(b, &m.rec); err != nil || m.rec.Version != 1 {
		f.Close()
		return nil, false, fmt.Errorf("high-water mark %s is unreadable (%v): it is not this server's, or was damaged; "+
			"move it aside to start without comparing the database with it", path, err)
	}
	return m, true, nil
}

// write replaces the record, and syncs it when sync is set.
func (m *mark) write(sync bool) error {
	b, err := json.Marshal(m.rec)
	if err != nil {
		return err
	}
	if len(b)+1 > markSize {
		return fmt.Errorf("high-water mark %s: record too long", m.path)
	}
	copy(m.buf, b)
	for i := len(b); i < markSize-1; i++ {
		m.buf[i] = ' '
	}
	m.buf[markSize-1] = '\n'
	if _, err := m.f.WriteAt(m.buf, 0); err != nil {
		return fmt.Errorf("high-water mark %s: %w", m.path, err)
	}
	if sync {
		if err := m.f.Sync(); err != nil {
			return fmt.Errorf("high-water mark %s: %w", m.path, err)
		}
		m.syncs++
	}
	return nil
}

// reserve makes reserved cover c, syncing once when a block is crossed;
// before the COMMIT of the transaction that brings c.
func (m *mark) reserve(c markCounters) error {
	r := &m.rec.Reserved
	if c.Token <= r.Token && c.EventID <= r.EventID && c.ClientAge <= r.ClientAge {
		return nil
	}
	next := m.rec
	next.Reserved = markCounters{Token: max(r.Token, c.Token+markBlock), EventID: max(r.EventID, c.EventID+markBlock),
		ClientAge: max(r.ClientAge, c.ClientAge+markBlock), Clock: max(r.Clock, c.Clock)}
	old := m.rec
	m.rec = next
	if err := m.write(true); err != nil {
		m.rec = old
		return err
	}
	return nil
}

// saw records c as committed, without a sync.
func (m *mark) saw(c markCounters) error {
	s := &m.rec.Seen
	if c.Token <= s.Token && c.EventID <= s.EventID && c.ClientAge <= s.ClientAge && c.Clock <= s.Clock {
		return nil
	}
	s.Token, s.EventID, s.ClientAge, s.Clock = max(s.Token, c.Token), max(s.EventID, c.EventID), max(s.ClientAge, c.ClientAge), max(s.Clock, c.Clock)
	return m.write(false)
}

func (m *mark) close() error {
	if m == nil {
		return nil
	}
	return m.f.Close()
}

// countersOf are the mark's figures of a database's.
func countersOf(sum service.Summary, c repo.Counters) markCounters {
	return markCounters{Token: sum.HighestToken, EventID: c.EventID, ClientAge: c.LastClientAge, Clock: sum.Clock}
}

// behind lists what of db is behind seen (and, after a power cut took the
// last unsynced seen, the reserved clock).
func behind(db, seen markCounters) []string {
	var out []string
	add := func(what string, d, s int64) {
		if d < s {
			out = append(out, fmt.Sprintf("%s %d, the mark has seen %d", what, d, s))
		}
	}
	add("highest token", db.Token, seen.Token)
	add("event id", db.EventID, seen.EventID)
	add("client age", db.ClientAge, seen.ClientAge)
	add("clock", db.Clock, seen.Clock)
	return out
}

// useMark opens the mark at path and compares r's database with it. A
// database behind it is refused with a *RollbackError, unless accept is
// set: then every counter moves past the mark, in one transaction, and
// the move is logged. It runs once, as the engine opens, before r serves
// anything: the mark's check at start-up, not one of the runner's own
// steps, which is why it and moveCounters are functions of r.
func useMark(ctx context.Context, r *runner, path string, accept bool, log func(msg string, args ...any)) error {
	m, existed, err := openMark(path)
	if err != nil {
		return err
	}
	var sum service.Summary
	if err := r.readOnly(ctx, func(tx *repo.Tx) error {
		var err error
		sum, err = service.ReadSummary(tx)
		return err
	}); err != nil {
		m.close()
		return err
	}
	db := countersOf(sum, r.st.Counters)
	if existed {
		if lost := behind(db, m.rec.Seen); len(lost) > 0 {
			if !accept {
				m.close()
				return &RollbackError{Mark: path, Behind: lost}
			}
			to := m.rec.Reserved
			to.Clock = max(db.Clock, m.rec.Seen.Clock, m.rec.Reserved.Clock)
			if err := moveCounters(ctx, r, to); err != nil {
				m.close()
				return fmt.Errorf("accepting the rollback: %w", err)
			}
			log("rollback accepted: the database was behind its high-water mark; every counter moved past the mark",
				"mark", path, "behind", strings.Join(lost, "; "), "token_floor", to.Token, "event_id", to.EventID,
				"client_age", to.ClientAge, "clock", to.Clock)
			db = markCounters{Token: max(db.Token, to.Token), EventID: max(db.EventID, to.EventID),
				ClientAge: max(db.ClientAge, to.ClientAge), Clock: to.Clock}
		}
	}
	// The mark follows the database from here: a mark behind it (new, or
	// from an older copy) only moves up.
	m.rec.Version = 1
	m.rec.Seen = db
	if err := m.reserve(db); err != nil {
		m.close()
		return err
	}
	if err := m.write(true); err != nil {
		m.close()
		return err
	}
	r.mark, r.markToken = m, db.Token
	return nil
}

// moveCounters raises every lock's token counter in r's database, the
// event id, the client age and the clock to at least to's, in one
// transaction. The token floor goes up with them: the locks that only the
// lost transactions created are not in the database to be raised, and
// start from it when taken again.
func moveCounters(ctx context.Context, r *runner, to markCounters) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	tx, err := r.begin(ctx)
	if err != nil {
		return err
	}
	if err := repo.RaiseTokens(tx, to.Token); err != nil {
		tx.Rollback()
		return err
	}
	c := r.st.Counters
	c.EventID, c.LastClientAge = max(c.EventID, to.EventID), max(c.LastClientAge, to.ClientAge)
	c.TokenFloor = max(c.TokenFloor, to.Token) // as RaiseTokens stored it
	if !c.ClockSet || c.Clock < to.Clock {
		c.Clock, c.ClockSet = to.Clock, true
	}
	if err := repo.ServiceCountersSet(tx, c); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.st.Counters = c
	return nil
}

// markNow is the runner's figures for the mark after the open
// transaction, whose events are r.events.
func (r *runner) markNow() markCounters {
	c := markCounters{Token: r.markToken, EventID: r.st.EventID, ClientAge: r.st.LastClientAge, Clock: r.st.Clock}
	for i := range r.events {
		c.Token = max(c.Token, r.events[i].Token)
	}
	return c
}
