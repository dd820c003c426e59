package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// The audit log is written ahead of each commit. The committer hands a
// transaction's events over just before its COMMIT (engine.Auditor);
// their lines go out in one write, and only then does the transaction
// commit and its operations get answered. A kill of the process, at any
// instant, therefore never leaves a committed change without its lines:
// not an acknowledged operation, nor a lapse that the server, or a restart
// of it, then acts on. (Written after the commit, they were lost whenever
// a kill came during the sync of the commit: a transaction is committed,
// for a killed process, once SQLite has written it to the WAL, before the
// sync returns.)
//
// The price is the converse doubt: a kill between the write and the COMMIT
// leaves the lines of a transaction that never committed, none of whose
// operations was answered. Each transaction's lines carry its "group"
// number, counted from 1 by each run of the server (a "start" line begins
// a run), and a line {"msg":"commit_failed"} or {"msg":"not_committed"}
// with a group number cancels the lines of the latest group of that number
// before it: the first when a COMMIT fails, the second when the next run
// of the server finds, in the database, that the previous run's last group
// never committed (Recover).

// aheadLog is the transaction side of the audit log.
type aheadLog struct {
	buf   bytes.Buffer // one group's lines, written out in one go
	lines *slog.Logger // writes to buf
	group int64        // the last group number given out
	// direct: encode the lines by hand into buf (appendLine, encode.go)
	// when they are the JSON lines of slog's default handler, for a
	// fraction of what lines takes on the committer (Format.direct).
	direct bool
	attrs  []slog.Attr // a line's attributes, kept from group to group

	// prev is the previous run's last group, read by start for Recover;
	// nil when there is nothing to settle.
	prev *pendingGroup
}

// pendingGroup is a group of a previous run whose commit is in doubt.
type pendingGroup struct {
	group     int64
	witnesses []service.Witness
}

func (a *aheadLog) start(w io.Writer, format Format) {
	a.lines = slog.New(format.handler(&a.buf))
	a.direct = format.direct()
	f, ok := w.(*os.File)
	if !ok || format != JSON {
		return
	}
	lines, torn, err := lastGroup(f.Name())
	if err != nil {
		return // not a regular file, or unreadable: nothing to settle
	}
	if torn {
		// A kill cut the last line short. End it, so that the next line
		// is a line of its own; the fragment is not JSON, and readers
		// skip it (docs/observability.md).
		f.Write([]byte("\n"))
	}
	if len(lines) > 0 {
		a.prev = &pendingGroup{group: lines[0].Group, witnesses: witnesses(lines)}
	}
}

// Audit writes the lines of a transaction's events, in one write, before
// the transaction commits (engine.Auditor). With Options.Principals, a
// deadlock abort's line names the principals on both sides.
func (t *Telemetry) Audit(events []service.Event) {
	if t.out == nil {
		return
	}
	a := &t.ahead
	a.buf.Reset()
	var group int64
	for _, e := range events {
		msg, attrs := t.eventLine(e, a.attrs[:0])
		a.attrs = attrs[:0] // grown to the longest line, for the next
		if msg == "" {
			continue
		}
		if group == 0 {
			a.group++
			group = a.group
		}
		a.write(msg, attrs, group)
	}
	if group == 0 {
		return // nothing the log tells (renewals, a client joining a queue)
	}
	if err := t.out.writeNow(a.buf.Bytes()); err != nil {
		t.auditErrors.Inc()
	}
}

// write puts a line of group into buf, through slog or by hand (direct).
func (a *aheadLog) write(msg string, attrs []slog.Attr, group int64) {
	if a.direct {
		// Each line has the time it is written at, as slog's would.
		// The bytes are appended where buf would put them, so that
		// Write copies nothing once buf has grown to a group's size.
		if b, ok := appendLine(a.buf.AvailableBuffer(), time.Now(), msg, attrs, group); ok {
			a.buf.Write(b)
			return
		}
	}
	attrs = append(attrs, slog.Int64("group", group))
	a.lines.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
}

// eventLine returns the message of e's line and its attributes, appended
// to attrs, in the order the line has them; the message is "" for an
// event that the log does not tell. Both ways of writing the line (write)
// take them from here, so that they cannot drift apart.
func (t *Telemetry) eventLine(e service.Event, attrs []slog.Attr) (string, []slog.Attr) {
	switch e.Kind {
	case lk.EventGrant:
		source := "immediate"
		if e.FromQueue {
			source = "queue"
		}
		return "grant", append(attrs, slog.String("lock", e.Lock), slog.String("client", e.Client),
			slog.String("mode", string(e.Mode)), slog.Int64("token", e.Token), slog.Int64("at", e.At),
			slog.Int64("expires_at", e.ExpiresAt), slog.String("source", source))
	case lk.EventLapse:
		return "lapse", append(attrs, slog.String("lock", e.Lock), slog.String("holder", e.Client),
			slog.String("mode", string(e.Mode)), slog.Int64("token", e.Token), slog.Int64("at", e.At))
	case lk.EventRelease, lk.EventRevoke: // the same line, named after the kind
		return string(e.Kind), append(attrs, slog.String("lock", e.Lock), slog.String("client", e.Client),
			slog.String("mode", string(e.Mode)), slog.Int64("token", e.Token), slog.Int64("at", e.At))
	case lk.EventWithdraw:
		return "withdraw", append(attrs, slog.String("lock", e.Lock), slog.String("client", e.Client),
			slog.String("mode", string(e.Mode)), slog.Int64("position", e.Position), slog.Int64("at", e.At))
	case lk.EventDeadlockAbort:
		// Written by slog in either format: its lists (lost, cycle) go
		// through encoding/json, which appendLine leaves to slog rather
		// than copy for a rare line.
		lost := e.Lost
		if lost == nil {
			lost = []lk.Holder{}
		}
		attrs = append(attrs, slog.String("client", e.Client), slog.String("requester", e.Requester),
			slog.Any("lost", lost), slog.String("waiting_for", e.Lock))
		if e.Lock != "" {
			attrs = append(attrs, slog.String("mode", string(e.Mode)))
		}
		if e.Position != 0 { // a requester that aborts itself never queued
			attrs = append(attrs, slog.Int64("position", e.Position))
		}
		if t.principals {
			attrs = append(attrs, slog.String("principal", t.actors.principal(e.Client)),
				slog.String("requester_principal", t.actors.principal(e.Requester)))
		}
		return "deadlock_abort", append(attrs, slog.Any("cycle", e.Cycle), slog.Int64("at", e.At))
	case lk.EventStaleWrite:
		return "stale_write", append(attrs, slog.String("lock", e.Lock), slog.Int64("token", e.Token),
			slog.Int64("highest", e.Highest), slog.Int64("at", e.At))
	case lk.EventFenceStale:
		attrs = append(attrs, slog.String("lock", e.Lock), slog.String("client", e.Client), slog.Int64("token", e.Token),
			slog.Int64("newer", e.Highest), slog.String("resource", e.Resource))
		if t.principals {
			attrs = append(attrs, slog.String("principal", t.actors.principal(e.Client)))
		}
		return "fence_stale", append(attrs, slog.Int64("at", e.At))
	case lk.EventUnfence:
		attrs = append(attrs, slog.String("lock", e.Lock), slog.Int64("was", e.Highest), slog.Int64("highest", e.Token))
		if e.By != "" {
			attrs = append(attrs, slog.String("principal", e.By))
		}
		return "unfence", append(attrs, slog.Int64("at", e.At))
	}
	return "", attrs
}

// CommitFailed cancels the lines of the group last written: its COMMIT
// failed, so none of it happened (engine.Auditor). On PostgreSQL a COMMIT
// cut off by a lost connection may have committed all the same; the
// operations were answered as failed, and later lines show which way it
// went (docs/observability.md).
func (t *Telemetry) CommitFailed(err error) {
	if t.out == nil || t.ahead.group == 0 {
		return
	}
	t.log("commit_failed", slog.Int64("group", t.ahead.group), slog.String("error", err.Error()))
	if err := t.flush(); err != nil {
		t.auditErrors.Inc()
	}
}

// Recover settles the previous run's last group (engine.Auditor): when the
// database shows that it never committed (the run was killed between
// writing its lines and committing), a "not_committed" line cancels it.
// When the database cannot tell (a database with peers, whose other
// servers may have run transactions since), the lines stand as written.
func (t *Telemetry) Recover(committed func(ctx context.Context, ws []service.Witness) (committed, known bool, err error)) {
	p := t.ahead.prev
	t.ahead.prev = nil
	if p == nil || t.out == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, known, err := committed(ctx, p.witnesses)
	switch {
	case err != nil:
		t.log("recovery_failed", slog.Int64("group", p.group), slog.String("error", err.Error()))
	case known && !done:
		t.log("not_committed", slog.Int64("group", p.group))
	default:
		return
	}
	if err := t.flush(); err != nil {
		t.auditErrors.Inc()
	}
}

// eventLines are the messages of the lines a transaction writes.
var eventLines = map[string]bool{"grant": true, "lapse": true, "release": true, "withdraw": true,
	"revoke": true, "deadlock_abort": true, "stale_write": true, "unfence": true}

// auditLine is the part of an audit line that Recover reads.
type auditLine struct {
	Msg        string      `json:"msg"`
	Group      int64       `json:"group"`
	Lock       string      `json:"lock"`
	Client     string      `json:"client"`
	Holder     string      `json:"holder"`
	Token      int64       `json:"token"`
	Position   int64       `json:"position"`
	WaitingFor string      `json:"waiting_for"`
	Lost       []lk.Holder `json:"lost"`
	Was        int64       `json:"was"`
	Highest    int64       `json:"highest"`
}

// witnesses turns a group's lines into what the database can check.
func witnesses(lines []auditLine) []service.Witness {
	var ws []service.Witness
	for _, l := range lines {
		switch l.Msg {
		case "grant":
			ws = append(ws, service.Witness{Kind: service.WitnessGrant, Lock: l.Lock, Token: l.Token})
		case "lapse":
			ws = append(ws, service.Witness{Kind: service.WitnessEnd, Lock: l.Lock, Client: l.Holder, Token: l.Token})
		case "release", "revoke":
			ws = append(ws, service.Witness{Kind: service.WitnessEnd, Lock: l.Lock, Client: l.Client, Token: l.Token})
		case "withdraw":
			ws = append(ws, service.Witness{Kind: service.WitnessDequeue, Lock: l.Lock, Position: l.Position})
		case "unfence":
			ws = append(ws, service.Witness{Kind: service.WitnessUnfence, Lock: l.Lock, Token: l.Highest, Fence: l.Was})
		case "deadlock_abort":
			if l.WaitingFor != "" {
				ws = append(ws, service.Witness{Kind: service.WitnessDequeue, Lock: l.WaitingFor, Position: l.Position})
			}
			for _, h := range l.Lost {
				ws = append(ws, service.Witness{Kind: service.WitnessEnd, Lock: h.Lock, Client: l.Client, Token: h.Token})
			}
		}
	}
	return ws
}

// lastGroup reads the audit file at path from its end and returns the
// lines of its last group, in order, unless a "start" line, or a line that
// settles it, comes after them; and whether the file ends in a line cut
// short. It reads back only as far as that group goes.
func lastGroup(path string) (lines []auditLine, torn bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, false, os.ErrInvalid
	}
	size := st.Size()
	for chunk := int64(64 << 10); ; chunk *= 4 {
		from := max(size-chunk, 0)
		b := make([]byte, size-from)
		if _, err := f.ReadAt(b, from); err != nil && err != io.EOF {
			return nil, false, err
		}
		torn = len(b) > 0 && b[len(b)-1] != '\n'
		raw := bytes.Split(b, []byte("\n"))
		raw = raw[:len(raw)-1] // after the last newline: "" or the torn line
		if from > 0 && len(raw) > 0 {
			raw = raw[1:] // may begin mid-line
		}
		lines, done := scanBack(raw)
		if done || from == 0 {
			return lines, torn, nil
		}
	}
}

// scanBack finds the last group in raw (lines, oldest first), reading from
// the end; done is false when the group may go on before raw's first line.
func scanBack(raw [][]byte) (lines []auditLine, done bool) {
	var group int64
	for i := len(raw) - 1; i >= 0; i-- {
		var l auditLine
		if json.Unmarshal(raw[i], &l) != nil {
			continue // a line a kill cut short, earlier
		}
		switch {
		case l.Msg == "start", l.Msg == "commit_failed", l.Msg == "not_committed":
			if group == 0 {
				return nil, true // a run that did nothing yet, or a settled group
			}
			done = true
		case !eventLines[l.Msg]:
			continue // a refused request's line, say
		case group == 0 || l.Group == group:
			group = l.Group
			lines = append(lines, l)
			continue
		default:
			done = true
		}
		break
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return lines, done
}

// writeNow writes p and everything buffered before it, at once.
func (f *flushWriter) writeNow(p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.w.Write(p); err != nil {
		return err
	}
	return f.w.Flush()
}
