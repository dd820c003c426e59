package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/service"
)

// Reads apart from the committer. The locks listing, status and the
// gauges only read, so they need neither the committer's order nor its
// commit: they run on the service's read connections (service.ReadLocks,
// ReadStatus, ReadCounts), concurrently with the group being committed,
// and see the groups committed before them. Every answered write was
// committed before its answer, so a client reads its own writes.

// readTS is the ts of a read apart: the clock, never below the last ts the
// committer used. Unlike tick it records nothing, as a read moves no time.
func (s *Server) readTS() int64 {
	ts := s.now().Unix()
	if last := s.lastTS.Load(); ts < last {
		ts = last
	}
	return ts
}

// readApart runs apart at the server's time outside the committer; when the
// service answers that only a write transaction knows (service.ErrNeedsTx:
// an in-memory database, or a status that waits on a lapse not yet
// retired), it runs inTx in the next group instead.
func readApart[R any](s *Server, ctx context.Context, name string, apart, inTx func(ctx context.Context, ts int64) (R, error)) (R, error) {
	res, err := apart(ctx, s.readTS())
	if errors.Is(err, service.ErrNeedsTx) {
		return run(s, ctx, name, inTx)
	}
	return res, err
}

// readOperation serves a GET that only reads: decode, judge, read apart
// (readApart), answer.
func readOperation[Q request, R any](s *Server, name string, decode func(*fields) Q,
	apart, inTx func(context.Context, int64, Q) (R, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, ok := decodeRequest(w, r, query, decode)
		if !ok || !s.allowed(w, r, Access{Op: name, Client: clientOf(q)}) {
			return
		}
		res, err := readApart(s, r.Context(), name,
			func(ctx context.Context, ts int64) (R, error) { return apart(ctx, ts, q) },
			func(ctx context.Context, ts int64) (R, error) { return inTx(ctx, ts, q) })
		if err != nil {
			s.fail(w, err)
			return
		}
		reply(w, res)
	})
}

// page reads a page's limit (1 to lk.MaxLocksLimit, lk.DefaultLocksLimit
// when absent) and after ("" when absent): of the locks listing and of
// status's holds.
func (f *fields) page() (limit int, after string) {
	n := f.integer("limit", false, lk.DefaultLocksLimit)
	if f.bad == nil && (n < 1 || n > lk.MaxLocksLimit) {
		f.fail(lk.CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d, got %d", lk.MaxLocksLimit, n))
		n = lk.DefaultLocksLimit
	}
	if _, ok := f.get("after"); ok {
		after = f.name("after")
	}
	return int(n), after
}
