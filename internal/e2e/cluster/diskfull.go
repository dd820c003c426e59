package cluster

import "fmt"

// LimitFileSize lowers RLIMIT_FSIZE on the running server process: no
// file it writes may grow past limit bytes, as on a full disk; limit < 0
// lifts it. The limit lasts as long as the process: a restarted server
// has none. Only on Linux: elsewhere the test is skipped. Noted in the
// history ("fsize-limit N", "fsize-unlimited").
func (s *Server) LimitFileSize(limit int64) {
	s.c.t.Helper()
	pid := s.Pid()
	if pid == 0 {
		s.c.t.Fatalf("e2e: a file size limit on server %d, which is not running", s.index)
	}
	if err := setFileSizeLimit(pid, limit); err != nil {
		if errUnsupported(err) {
			s.c.t.Skipf("e2e: %v", err)
		}
		s.c.t.Fatalf("e2e: server %d: %v", s.index, err)
	}
	kind := "fsize-unlimited"
	if limit >= 0 {
		kind = fmt.Sprintf("fsize-limit %d", limit)
	}
	s.c.fault(kind, s, 0)
}

// DB is the servers' --db as the cluster made it: the SQLite file, or
// the PostgreSQL URL (each server's goes through its proxy with
// Options.ProxyPostgres).
func (c *Cluster) DB() string { return c.db }
