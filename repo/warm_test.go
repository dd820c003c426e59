package repo

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestPureReads: the statements that drop no read kept (warm.go) are the
// pure reads, in both dialects; the arguments that a declared write
// names as its lock and client are among its parameters.
func TestPureReads(t *testing.T) {
	for _, d := range []dialect{sqliteDialect{}, postgresDialect{}} {
		texts, err := render(d)
		if err != nil {
			t.Fatal(err)
		}
		pure := pureReads(texts)
		for q, want := range map[statement]bool{
			qRequestStateGet: true, qNextPredecessors: true, qWaitEdgesBeforeQueueing: true, qLockServiceRow: true,
			qQueueAppend: false, qLockGrantTakeToken: false, qLeaseEndOne: false, qGrantsLapse: false,
			qQueueTakeClient: false, qNotifyEventID: false, qBegin: false, qRollback: false,
		} {
			if texts[q] != "" && pure[q] != want {
				t.Errorf("%s (%s): pure read %v, want %v: %s", q, d, pure[q], want, texts[q])
			}
		}
		params := regexp.MustCompile(`[?$](\d*)`)
		for q, f := range footprints {
			if pure[q] {
				t.Errorf("%s (%s) has a footprint and is a pure read", q, d)
			}
			n := 0
			for i, m := range params.FindAllStringSubmatch(texts[q], -1) {
				k := i + 1
				if m[1] != "" {
					k = 0
					for _, c := range m[1] {
						k = k*10 + int(c-'0')
					}
				}
				n = max(n, k)
			}
			if texts[q] != "" && (f.lock >= n || f.client >= n) {
				t.Errorf("%s (%s): footprint %+v, but %d parameters", q, d, f, n)
			}
		}
	}
}

// TestFootprintsBind: the argument that a footprint names as a write's
// lock is bound, in its PostgreSQL text, to a lock's column (leases.lock,
// locks.name, ...), and the one it names as its client to a client's
// (client, clients.name). A footprint pointing at another argument (a
// position, a mode) would drop no rows kept of the lock or client that the
// statement changes.
func TestFootprintsBind(t *testing.T) {
	texts, err := render(postgresDialect{})
	if err != nil {
		t.Fatal(err)
	}
	for q, f := range footprints {
		binds := columnsBound(texts[q])
		for _, c := range []struct {
			arg  int
			kind string
		}{{f.lock, "lock"}, {f.client, "client"}} {
			if c.arg < 0 {
				continue
			}
			if got := binds[c.arg+1]; !got[c.kind] {
				t.Errorf("%s: footprint %+v: $%d is bound to %v, not to a %s's column: %s", q, f, c.arg+1, got, c.kind, texts[q])
			}
		}
	}
}

var (
	compared = regexp.MustCompile(`\b(lock|client|name)\s*=\s*\$(\d+)\b`)
	inserted = regexp.MustCompile(`INSERT INTO (\w+) \(([^)]*)\)\s*(?:VALUES\s*\(|SELECT )`)
)

// columnsBound tells, for each parameter of a PostgreSQL statement, the
// kinds of the columns it is compared with or inserted into: "lock" for a
// lock column and locks.name, "client" for a client column and
// clients.name. In a comparison, name is a lock's: the statements with a
// footprint compare no client by its row's name.
func columnsBound(text string) map[int]map[string]bool {
	binds := map[int]map[string]bool{}
	bind := func(param int, kind string) {
		if binds[param] == nil {
			binds[param] = map[string]bool{}
		}
		binds[param][kind] = true
	}
	kindOf := func(table, column string) string {
		switch {
		case column == "client", column == "name" && table == "clients":
			return "client"
		case column == "lock", column == "name":
			return "lock"
		}
		return column
	}
	for _, m := range compared.FindAllStringSubmatch(text, -1) {
		var n int
		fmt.Sscan(m[2], &n)
		bind(n, kindOf("", m[1]))
	}
	for _, loc := range inserted.FindAllStringSubmatchIndex(text, -1) {
		table, columns := text[loc[2]:loc[3]], strings.Split(text[loc[4]:loc[5]], ",")
		rest := text[loc[1]:]
		for i, v := range strings.Split(rest, ",") {
			if i >= len(columns) {
				break
			}
			var n int
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "$%d", &n); err == nil {
				bind(n, kindOf(table, strings.TrimSpace(columns[i])))
			}
		}
	}
	return binds
}

// TestInvalidateUnnamed: a write whose footprint's argument is no name
// drops every row kept; one whose arguments name its lock and client
// drops those of that lock or client only.
func TestInvalidateUnnamed(t *testing.T) {
	texts, err := render(postgresDialect{})
	if err != nil {
		t.Fatal(err)
	}
	d := &DB{pure: pureReads(texts)}
	keptOf := func() *Tx {
		return &Tx{d: d, kept: []*kept{
			{w: &warm{lock: "L", client: "c"}},
			{w: &warm{lock: "M", client: "d"}},
			{w: &warm{lock: "N", client: "e"}},
		}}
	}
	left := func(tx *Tx) (ls []string) {
		for _, k := range tx.kept {
			ls = append(ls, k.w.lock)
		}
		return ls
	}
	tx := keptOf()
	tx.invalidate(qQueueAppend, []any{"L", int64(1), "d", "exclusive", int64(30), int64(1000)})
	if got := fmt.Sprint(left(tx)); got != "[N]" {
		t.Errorf("QueueAppend of L by d: kept %s, want [N]", got)
	}
	for _, args := range [][]any{
		{"L", int64(1), int64(7), "exclusive", int64(30), int64(1000)}, // the client argument is no string
		{"L", int64(1), "", "exclusive", int64(30), int64(1000)},       // nor an empty one
		{"L", int64(1)}, // missing
	} {
		tx := keptOf()
		tx.invalidate(qQueueAppend, args)
		if len(tx.kept) != 0 {
			t.Errorf("QueueAppend with arguments %v: kept %v, want none", args, left(tx))
		}
	}
}
