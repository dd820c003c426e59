package validate

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// The audit log checked against the history (docs/observability.md, "What
// a kill can do to it"). Its lines reach the file before their transaction
// commits, and a restart cancels (not_committed) the lines of a last
// transaction that a kill kept from committing; so once cancellations are
// applied the log must tell exactly what the server did, and the replay
// allows nothing: every grant takes the lock's next token, no grant finds
// a holder it cannot share the lock with, every end names a lease that is
// held, and every acknowledged grant, release, withdrawal and refused
// write has its line.

// The names of the audit checks.
const (
	CheckAuditReplay = "audit-replay" // the log, replayed, is a possible history of the locks
	CheckAuditAcked  = "audit-acked"  // every acknowledged grant, release, withdrawal and stale write has its line
	CheckAuditEnd    = "audit-end"    // the log's holders at its end are the ones the history leaves
)

// AuditEntry is one line of the audit log, as far as the checks read it.
type AuditEntry struct {
	Msg       string      `json:"msg"`
	Group     int64       `json:"group"`
	Lock      string      `json:"lock"`
	Client    string      `json:"client"`
	Holder    string      `json:"holder"`
	Mode      lk.Mode     `json:"mode"`
	Token     int64       `json:"token"`
	At        int64       `json:"at"`
	ExpiresAt int64       `json:"expires_at"`
	Lost      []lk.Holder `json:"lost"`

	// Where is the line's file and number, for messages.
	Where string `json:"-"`
	// Cancelled: a later commit_failed or not_committed line says its
	// transaction never happened.
	Cancelled bool `json:"-"`
}

// AuditLog is one server's audit log, every run of it in order.
type AuditLog struct {
	Entries   []*AuditEntry // with Cancelled set; start lines included
	Starts    int           // start lines: runs of the server
	Cancelled int           // lines cancelled as never committed
	// NotCommitted counts not_committed lines: restarts that found the
	// previous run killed between writing a group's lines and its
	// COMMIT. Each is a kill that landed mid-group-commit.
	NotCommitted int
	Torn         int // lines a kill cut short
}

// ReadAudit reads one server's audit log from files, oldest first: its
// --audit-log file, or the standard error of each of its starts
// (cluster.Server.Logs), whose other lines (not JSON objects) it skips. A line cut
// short by a kill is allowed where a kill can leave it: last in its file,
// or followed by the next run's start line. Problems are violations of
// CheckAuditReplay.
func ReadAudit(files ...string) (AuditLog, []Violation) {
	var vs violations
	var log AuditLog
	type raw struct {
		text, where string
		last        bool
	}
	var lines []raw
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			vs.add(CheckAuditReplay, "audit log: %v", err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
			if t := sc.Text(); strings.HasPrefix(t, "{") {
				lines = append(lines, raw{text: t, where: fmt.Sprintf("%s:%d", base(path), n)})
			}
		}
		if err := sc.Err(); err != nil {
			vs.add(CheckAuditReplay, "reading %s: %v", path, err)
		}
		f.Close()
		if len(lines) > 0 {
			lines[len(lines)-1].last = true
		}
	}
	for i, l := range lines {
		e := &AuditEntry{Where: l.where}
		if err := json.Unmarshal([]byte(l.text), e); err != nil || e.Msg == "" {
			var next AuditEntry
			if l.last || (i+1 < len(lines) && json.Unmarshal([]byte(lines[i+1].text), &next) == nil && next.Msg == "start") {
				log.Torn++
				continue
			}
			vs.add(CheckAuditReplay, "audit line %s is not a JSON line of the log: %q", l.where, l.text)
			continue
		}
		switch e.Msg {
		case "start":
			log.Starts++
		case "commit_failed", "not_committed":
			if e.Msg == "not_committed" {
				log.NotCommitted++
			}
			// Cancels the latest group of that number before it: in the
			// same run (commit_failed) or the previous one (not_committed,
			// written after the next run's start line).
			n := 0
			for j := len(log.Entries) - 1; j >= 0; j-- {
				p := log.Entries[j]
				if p.Msg == "start" && n > 0 {
					break
				}
				if p.Group == 0 {
					continue // a start line, or a refused request's line
				}
				if p.Group != e.Group {
					if n > 0 {
						break // the group ended
					}
					continue
				}
				p.Cancelled = true
				n++
			}
			log.Cancelled += n
			continue
		}
		log.Entries = append(log.Entries, e)
	}
	return log, vs.result()
}

func base(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// auditLease is a lease as the audit log tells it.
type auditLease struct {
	client  string
	mode    lk.Mode
	token   int64
	expires int64
	where   string
}

// CheckAudit checks the audit logs of the servers of h's run against h.
// logs holds each server's files (one slice per server, by index; files
// oldest first, as ReadAudit takes them). Read them once the run is over
// and nothing else runs.
//
// With one server, the log is replayed: every grant takes the lock's next
// token (L5: none missing, every grant logged) and finds no holder it
// cannot share with, every lapse, release, revoke or deadlock abort ends a
// lease that is held, times (at) never go back on a lock, there is a start
// line per start of the server that h noted, and at the end the log's
// holders are the ones h leaves (CheckAuditEnd). That needs the
// --audit-log file: only from a file does a restart settle (not_committed)
// the previous run's last group.
//
// With several servers (on PostgreSQL) their logs interleave in an order
// no log tells, and a killed server's last group is never settled, so only
// CheckAuditAcked runs, over the union of the logs: every acknowledged
// grant has its line, as answered, and so on.
func CheckAudit(h *history.History, logs ...[]string) []Violation {
	var vs violations
	var all []*AuditEntry
	for server, files := range logs {
		log, bad := ReadAudit(files...)
		vs.list = append(vs.list, bad...)
		if want := countFaults(h, "start", server); want > 0 && log.Starts != want {
			vs.add(CheckAuditReplay, "server %d's audit log has %d start lines; the server was started %d times", server, log.Starts, want)
		}
		for _, e := range log.Entries {
			if !e.Cancelled && e.Msg != "start" {
				all = append(all, e)
			}
		}
	}
	var holders map[string]map[string]*auditLease
	if len(logs) == 1 {
		holders = replayAudit(&vs, all)
	}
	checkAuditAcked(&vs, h, all, holders)
	return vs.result()
}

func countFaults(h *history.History, kind string, server int) int {
	n := 0
	for _, f := range h.Faults() {
		if f.Kind == kind && f.Server == server {
			n++
		}
	}
	return n
}

// replayAudit replays es, one server's uncancelled lines in order, and
// returns the holders at the end, by lock and client.
func replayAudit(vs *violations, es []*AuditEntry) map[string]map[string]*auditLease {
	holders := map[string]map[string]*auditLease{}
	lastToken := map[string]int64{}
	lastAt := map[string]int64{}
	end := func(e *AuditEntry, lock, client string, mode lk.Mode, token int64) {
		l := holders[lock][client]
		switch {
		case l == nil:
			vs.add(CheckAuditReplay, "audit line %s: %s of %s's lease on %s (token %d), which the log shows no grant of", e.Where, e.Msg, client, lock, token)
		case l.token != token || l.mode != mode:
			vs.add(CheckAuditReplay, "audit line %s: %s of %s's %s lease on %s with token %d, but the log shows it holding %s token %d (line %s)",
				e.Where, e.Msg, client, mode, lock, token, l.mode, l.token, l.where)
		default:
			delete(holders[lock], client)
		}
	}
	for _, e := range es {
		if e.Lock != "" && e.Msg != "deadlock_abort" {
			if e.At < lastAt[e.Lock] {
				vs.add(CheckAuditReplay, "audit line %s: %s on %s at %d, after a line at %d", e.Where, e.Msg, e.Lock, e.At, lastAt[e.Lock])
			}
			lastAt[e.Lock] = max(lastAt[e.Lock], e.At)
		}
		switch e.Msg {
		case "grant":
			if e.Mode != lk.Shared && e.Mode != lk.Exclusive {
				vs.add(CheckAuditReplay, "audit line %s: a grant without a mode", e.Where)
			}
			if e.Token != lastToken[e.Lock]+1 {
				vs.add(CheckAuditReplay, "audit line %s: %s granted token %d on %s after token %d (L5: the next one, and every grant logged)",
					e.Where, e.Client, e.Token, e.Lock, lastToken[e.Lock])
			}
			lastToken[e.Lock] = max(lastToken[e.Lock], e.Token)
			if holders[e.Lock] == nil {
				holders[e.Lock] = map[string]*auditLease{}
			}
			for _, o := range holders[e.Lock] {
				if e.Mode == lk.Exclusive || o.mode == lk.Exclusive || o.client == e.Client {
					vs.add(CheckAuditReplay, "audit line %s: %s granted %s %s (token %d) while %s held it %s (token %d, line %s)",
						e.Where, e.Client, e.Lock, e.Mode, e.Token, o.client, o.mode, o.token, o.where)
				}
			}
			holders[e.Lock][e.Client] = &auditLease{client: e.Client, mode: e.Mode, token: e.Token, expires: e.ExpiresAt, where: e.Where}
		case "lapse":
			end(e, e.Lock, e.Holder, e.Mode, e.Token)
		case "release", "revoke":
			end(e, e.Lock, e.Client, e.Mode, e.Token)
		case "deadlock_abort":
			for _, l := range e.Lost {
				end(e, l.Lock, e.Client, l.Mode, l.Token)
			}
		case "withdraw", "stale_write", "unfence", "auth_failure", "refusals_suppressed", "recovery_failed":
			// no holder changes
		default:
			vs.add(CheckAuditReplay, "audit line %s: unexpected message %q", e.Where, e.Msg)
		}
	}
	return holders
}

// checkAuditAcked: every acknowledged grant has its grant line (client,
// mode, expires_at as answered); the release that followed an acknowledged
// grant, acknowledged, has its release line with the grant's token; and
// acknowledged releases, withdrawals and stale refusals have at least as
// many lines as answers, per lock and client. With holders (the replay's
// end), the end state too (CheckAuditEnd).
func checkAuditAcked(vs *violations, h *history.History, es []*AuditEntry, holders map[string]map[string]*auditLease) {
	type lc struct{ lock, client string }
	type lt struct {
		lock  string
		token int64
	}
	grants := map[lt]*AuditEntry{}
	released := map[lt]*AuditEntry{}
	lines := map[string]map[lc]int{} // by msg
	for _, e := range es {
		client := e.Client
		switch e.Msg {
		case "grant":
			grants[lt{e.Lock, e.Token}] = e
		case "release":
			released[lt{e.Lock, e.Token}] = e
		case "stale_write":
			client = ""
		}
		if lines[e.Msg] == nil {
			lines[e.Msg] = map[lc]int{}
		}
		lines[e.Msg][lc{e.Lock, client}]++
	}
	ops := h.Ops()
	slices.SortStableFunc(ops, func(a, b history.Op) int { return cmp.Compare(a.Call, b.Call) })
	answered := map[string]map[lc]int{}
	count := func(msg string, k lc) {
		if answered[msg] == nil {
			answered[msg] = map[lc]int{}
		}
		answered[msg][k]++
	}
	// Per client and lock, the lease the history says it holds: the last
	// acknowledged grant, until an acknowledged release; unsure after an
	// unknown outcome of an acquire or a release.
	type state struct {
		grant  *history.Op
		unsure bool
	}
	st := map[lc]*state{}
	for i := range ops {
		op := &ops[i]
		in, out := op.Input, op.Output
		if !out.Known() {
			if out.Unknown && (in.Kind == history.Acquire || in.Kind == history.Release) {
				st[lc{in.Lock, in.Client}] = &state{unsure: true}
			}
			continue
		}
		k := lc{in.Lock, in.Client}
		switch {
		case granted(*op):
			e := grants[lt{in.Lock, out.Token}]
			switch {
			case e == nil:
				vs.add(CheckAuditAcked, "acknowledged %v has no grant line", op)
			case e.Client != in.Client || e.Mode != in.Mode || e.ExpiresAt != out.ExpiresAt:
				vs.add(CheckAuditAcked, "acknowledged %v, but audit line %s grants token %d to %s %s until %d",
					op, e.Where, e.Token, e.Client, e.Mode, e.ExpiresAt)
			}
			st[k] = &state{grant: op}
		case in.Kind == history.Release && out.Outcome == lk.Released:
			count("release", k)
			if s := st[k]; s != nil && s.grant != nil {
				if e := released[lt{in.Lock, s.grant.Output.Token}]; e == nil || e.Client != in.Client {
					vs.add(CheckAuditAcked, "acknowledged %v of the lease of %v has no release line with token %d", op, s.grant, s.grant.Output.Token)
				}
			}
			st[k] = &state{}
		case in.Kind == history.Release && out.Outcome == lk.Withdrawn:
			count("withdraw", k)
			st[k] = &state{}
		case in.Kind == history.Release: // not a holder: holds and awaits nothing
			st[k] = &state{}
		case in.Kind == history.Write && out.Err == lk.CodeStaleToken:
			count("stale_write", lc{in.Lock, ""})
		}
	}
	for msg, m := range answered {
		for k, n := range m {
			if got := lines[msg][k]; got < n {
				vs.add(CheckAuditAcked, "%d %s answers on %s (client %q), but %d %s lines", n, msg, k.lock, k.client, got, msg)
			}
		}
	}
	if holders == nil {
		return
	}
	// The end: what the history leaves held is held in the log, and what
	// it leaves free is free there. A lease that may have lapsed by now
	// is left out.
	now := time.Now().Unix()
	for k, s := range st {
		if s.unsure {
			continue
		}
		l := holders[k.lock][k.client]
		switch {
		case s.grant == nil && l != nil:
			vs.add(CheckAuditEnd, "%s: the log ends with %s holding it (token %d, line %s); the history's last answer to %s left it holding nothing",
				k.lock, k.client, l.token, l.where, k.client)
		case s.grant != nil && s.grant.Output.ExpiresAt > now+1 && (l == nil || l.token != s.grant.Output.Token):
			vs.add(CheckAuditEnd, "%s: %v, never released, is not held at the end of the log", k.lock, s.grant)
		}
	}
	for lock, m := range holders {
		for client, l := range m {
			if st[lc{lock, client}] == nil && l.expires > now+1 {
				vs.add(CheckAuditEnd, "%s: the log ends with %s holding it (token %d, line %s), which the history never asked for", lock, client, l.token, l.where)
			}
		}
	}
}
