package server

import (
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

func decodeHistory(f *fields) lk.HistoryRequest {
	var q lk.HistoryRequest
	if _, ok := f.get("lock"); ok {
		q.Lock = f.name("lock")
	}
	if _, ok := f.get("client"); ok {
		q.Client = f.name("client")
	}
	q.Limit = int(f.integer("limit", false, lk.DefaultLocksLimit))
	if v, ok := f.get("before"); ok {
		// A client's cursor holds a lock name: as long as a name, and a
		// little more (lk.ClientCursor).
		s, _ := v.(string)
		if s == "" || len(s) > MaxNameBytes+48 {
			f.fail(lk.CodeInvalidArguments, "before must be the next of the previous page")
		}
		q.Before = s
	}
	return q
}

// handleHistory serves GET /v1/history: a page of the grant history of a
// lock or of a client, read apart from the committer. A client
// principal asks about a client only as one of its own client ids (the
// Authorizer sees to that), and of a lock's history it is shown only the
// rows of its own client ids: a page may then hold fewer grants than its
// limit, its next being that of the whole page.
func (s *Server) handleHistory(w http.ResponseWriter, r *http.Request) {
	q, ok := decodeRequest(w, r, query, decodeHistory)
	if !ok || !s.allowed(w, r, Access{Op: "history", Client: q.Client}) {
		return
	}
	var scope func(string) bool
	if cs, ok := s.auth.(ClientScoper); ok {
		scope = cs.ClientScope(r)
	}
	res, err := s.eng.History(r.Context(), q)
	if err != nil {
		s.fail(w, err)
		return
	}
	if scope != nil {
		kept := res.Grants[:0]
		for _, g := range res.Grants {
			if scope(g.Client) {
				kept = append(kept, g)
			}
		}
		res.Grants = kept
	}
	reply(w, res)
}
