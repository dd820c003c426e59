package server

import "context"

// OldestWait returns how long, in whole seconds now, the client waiting
// longest in any queue has waited (0 when nobody waits): for a metrics
// gauge. One index lookup, read apart from the committer as Counts is.
func (s *Server) OldestWait(ctx context.Context) (int64, error) {
	return readApart(s, ctx, "oldest_wait", s.svc.ReadOldestWait, s.svc.OldestWait)
}

// Max returns the cap on open connections, 0 for none.
func (c *Conns) Max() int { return c.max }
