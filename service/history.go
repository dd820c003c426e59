package service

import (
	"math"
	"strconv"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// The grant history: one row per token granted, which the rules write as
// they end leases (acquire.go, lapse.go, release.go, handover.go,
// deadlock.go), and History, which reads it. A live grant's row is its
// lease; an ended one is appended to grants_ended, where it stays until
// the retention below deletes it (SQL and why in repo/grants.go).

// HistoryRetention bounds the grant history. A live lease's row is never
// pruned.
type HistoryRetention struct {
	// Keep is how many of a lock's last tokens keep their rows once ended,
	// at least: the rows behind go a step of up to 64 tokens at a time
	// (repo/grants.go) (serve --history-keep); 0 means DefaultHistoryKeep.
	Keep int64
	// Days is how long an ended row is kept after its lease ended
	// (serve --history-days); 0 means DefaultHistoryDays.
	Days int64
}

const (
	DefaultHistoryKeep = 1000
	DefaultHistoryDays = 30
)

func (r HistoryRetention) keep() int64 {
	if r.Keep <= 0 {
		return DefaultHistoryKeep
	}
	return r.Keep
}

func (r HistoryRetention) days() int64 {
	if r.Days <= 0 {
		return DefaultHistoryDays
	}
	return r.Days
}

// historyPruneEvery is how often (in the service's seconds) an operation
// looks for rows past their days while it finds fewer than a batch
// (repo.GrantsPruneBatch): small batches, so that no operation, and no
// group commit, waits long behind the pruning.
const historyPruneEvery = 60

// pruneHistory deletes a batch of rows that ended more than Days before ts,
// when it is time to look (State.PruneAt). A full batch means there may be
// more: the next operation looks again. A partial one means that the
// oldest rows recorded are not all past their days (repo: rows are pruned
// in the order they were recorded), and the next look is a minute later.
// It costs an operation nothing between looks; the server's lapse timer
// and every request make the operations.
func pruneHistory(op *Op) error {
	ts, days := op.Now, op.Config.History.days()
	if ts < op.State.PruneAt {
		return nil
	}
	before := ts - days*86400
	if ts < math.MinInt64+days*86400 {
		before = math.MinInt64
	}
	n, err := repo.GrantsPruneEndedBefore(op.Tx, before)
	if err != nil {
		return err
	}
	moreAborts, err := pruneAborts(op, before) // explain.go: kept as long
	if err != nil {
		return err
	}
	op.State.PruneAt = ts
	if n < repo.GrantsPruneBatch && !moreAborts {
		op.State.PruneAt = lk.AddTime(ts, historyPruneEvery)
	}
	return nil
}

// History returns a page of the grant history of req.Lock or req.Client,
// newest first, at op.Now: the leases that lapsed by then have ended. Read
// apart, a row of a lease that ended by op.Now but is not retired yet would
// still show it live, and its retirement may grant its lock to a waiter:
// the answer is then ErrNeedsTx.
func History(op *Op, req lk.HistoryRequest) (lk.HistoryResult, error) {
	if err := req.Validate(); err != nil {
		return lk.HistoryResult{}, err
	}
	out, err := historyPage(op.Tx, req)
	if err != nil {
		return out, err
	}
	for _, g := range out.Grants {
		if g.Ended == nil && g.ExpiresAt <= op.Now {
			return out, ErrNeedsTx
		}
	}
	return out, nil
}

func historyPage(tx *repo.Tx, req lk.HistoryRequest) (lk.HistoryResult, error) {
	var out lk.HistoryResult
	var more bool
	var err error
	if req.Lock != "" {
		var before int64
		if req.Before != "" {
			before, _ = strconv.ParseInt(req.Before, 10, 64) // Validate checked it
		}
		out.Grants, more, err = repo.GrantsOfLock(tx, req.Lock, before, req.Limit)
		if err == nil && more {
			next := strconv.FormatInt(out.Grants[len(out.Grants)-1].Token, 10)
			out.Next = &next
		}
		return out, err
	}
	var after *lk.ClientCursor
	if req.Before != "" {
		c, _ := lk.ParseClientCursor(req.Before) // Validate checked it
		after = &c
	}
	out.Grants, more, err = repo.GrantsOfClient(tx, req.Client, after, req.Limit)
	if err == nil && more {
		last := out.Grants[len(out.Grants)-1]
		next := lk.ClientCursor{GrantedAt: last.GrantedAt, Token: last.Token, Lock: last.Lock}.String()
		out.Next = &next
	}
	return out, err
}
