package validate

import (
	"net/http"
	"strings"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// What the answers themselves promise, whatever the state: the server
// answers every request, and while the database is away its answer is the
// one docs/deployment.md ("When the database fails over") promises, for no
// longer than it takes to find the database again.

// The names of the checks on answers.
const (
	CheckUnavailable = "unavailable-answer" // a 5xx answer is 503 {"error": "unavailable"} with Retry-After: 1
	CheckRecovery    = "recovery"           // 5xx only during a database or disk fault, and no longer than RecoverBy after it ended
	CheckNoAnswer    = "no-answer"          // a server that was up answered every request sent to it
)

// RecoverBy is how soon after a database fault ends (the standby promoted,
// the connections let through again) the servers answer normally again, on
// their own.
const RecoverBy = 5 * time.Second

// faultNoted bounds how long after a fault's effect on its clients the
// fault is noted (Fault.At): a kill, once the process is gone.
const faultNoted = 5 * time.Second

// serverDown: the faults after which a server may answer nothing,
// or late: it is gone, stopped, or its database is cut off or slowed.
func serverDown(kind string) bool {
	switch {
	case kind == "kill", kind == "stop", kind == "pause",
		strings.HasPrefix(kind, "cut-db"), strings.HasPrefix(kind, "delay-db") && kind != "delay-db 0s":
		return true
	}
	return false
}

// dbWindow is a stretch of time in which server (-1: every server) may
// answer 5xx: from the fault that took its database away to RecoverBy
// after the fault that gave it back (never, if none did).
type dbWindow struct {
	server   int
	from, to int64
}

// dbWindows are the database faults of a history: the primary's crash to
// the promotion (FaultPrimaryCrash, FaultPromote), a server's connections
// cut or slowed to their restoration (cluster.Proxy: cut-db, delay-db,
// restore-db), its disk full to the limit lifted or the process restarted
// (Server.LimitFileSize: fsize-limit, fsize-unlimited); and for every
// server, a server's connections slowed or its process paused (delay-db,
// pause to resume), which holds the service row its peers need.
func dbWindows(faults []history.Fault) []dbWindow {
	var out []dbWindow
	type opened struct {
		i    int
		disk bool
	}
	open := map[int]opened{} // key -> its open window
	for _, f := range faults {
		server, key := f.Server, f.Server
		if f.Kind == history.FaultPrimaryCrash || f.Kind == history.FaultPromote {
			server, key = -1, -1
		}
		// A server slowed or paused may hold the service row every server
		// of a PostgreSQL database queues for: its peers answer 503 when
		// they cannot get it in repo.ServiceLockTimeout.
		if strings.HasPrefix(f.Kind, "delay-db") || f.Kind == "pause" || f.Kind == "resume" {
			server, key = -1, -2-f.Server
		}
		switch {
		case f.Kind == history.FaultPrimaryCrash, strings.HasPrefix(f.Kind, "cut-db"), f.Kind == history.FaultCommitThenFail,
			strings.HasPrefix(f.Kind, "delay-db") && f.Kind != "delay-db 0s",
			strings.HasPrefix(f.Kind, "fsize-limit"), f.Kind == "pause":
			if _, ok := open[key]; !ok {
				open[key] = opened{len(out), strings.HasPrefix(f.Kind, "fsize-limit")}
				out = append(out, dbWindow{server: server, from: f.At, to: never})
			}
		case f.Kind == history.FaultPromote, f.Kind == "restore-db", f.Kind == "delay-db 0s", f.Kind == "fsize-unlimited",
			f.Kind == "start" && open[key].disk, f.Kind == "resume":
			if o, ok := open[key]; ok {
				out[o.i].to = f.At + int64(RecoverBy)
				delete(open, key)
			}
		}
	}
	return out
}

// checkAnswers: every answer of 500 or more is 503 unavailable with
// Retry-After: 1 (CheckUnavailable); it came during a fault of its
// server's database or disk, sent no later than RecoverBy after that fault
// ended (CheckRecovery); and an outcome is unknown for want of any answer only
// when its server was killed, stopped, paused or cut off from its
// database while the request was in flight, or before (CheckNoAnswer).
func checkAnswers(vs *violations, ops []history.Op, faults []history.Fault) {
	windows := dbWindows(faults)
	for _, op := range ops {
		o := op.Output
		if !o.Unknown {
			continue
		}
		if o.Status != 0 {
			if o.Status != http.StatusServiceUnavailable || o.Code != lk.CodeUnavailable || o.RetryAfter != 1 {
				vs.add(CheckUnavailable, "answered %d %q with Retry-After %d s, not 503 unavailable with Retry-After: 1: %v",
					o.Status, o.Code, o.RetryAfter, op)
			}
			in := false
			for _, w := range windows {
				if (w.server == -1 || w.server == op.Server) && op.Return >= w.from && op.Call <= w.to {
					in = true
					break
				}
			}
			if !in {
				vs.add(CheckRecovery, "answered %d outside any database fault, or more than %v after it ended: %v", o.Status, RecoverBy, op)
			}
			continue
		}
		// No answer: was the server down when it was sent, or did
		// something happen to it before the client gave up?
		down := false
		for _, f := range faults {
			// A kill is noted once the process is gone, which may be
			// after its clients saw their connections reset.
			if f.Server != op.Server || f.At > op.Return+int64(faultNoted) {
				continue
			}
			if f.At >= op.Call {
				down = true
				break
			}
			down = serverDown(f.Kind) // the server's state at the call: its last fault's
		}
		if !down {
			vs.add(CheckNoAnswer, "no answer from server %d, which was up: %v", op.Server, op)
		}
	}
}
