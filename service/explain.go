package service

import (
	"math"
	"slices"
	"strconv"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// Answers that say why (docs/api.md, "Answers that say why"), with
// Config.Explain: a grant's predecessors, a victim's abort kept for its
// status, and a waiter's estimated wait. The deadlock cycle of an acquire's
// answer is known in memory (deadlock.go) and needs no option.

const (
	// maxPredecessors caps a grant's predecessors: a writer after a crowd
	// of readers names the first that ended.
	maxPredecessors = 100
	// holdSample is how many of a lock's last ended leases the wait
	// estimate averages.
	holdSample = 20
	// estimateHorizon is the deepest rank in a queue that gets an
	// estimated wait (docs/api.md): the estimate reads every entry ahead,
	// so past it a queued answer, a status or an inspect page would cost
	// what the whole queue holds, and a guess that far out says little.
	estimateHorizon = 100
	// abortPruneBatch bounds the aborts one operation prunes.
	abortPruneBatch = 256
)

// explainGrants fills in the predecessors of the grants among the events the
// current operation added since it last looked, once the operation's
// history rows are written: a hand-over during retire writes its lapsed
// rows only after settling every lock.
func explainGrants(op *Op) error {
	if !op.Config.Explain {
		return nil
	}
	for i := op.explained; i < len(op.Events); i++ {
		e := &op.Events[i]
		if e.Kind != lk.EventGrant {
			continue
		}
		// A reader granted with the one before it has its predecessors
		// (repo.GrantPredecessors): a crowd granted together reads them once.
		if i > 0 {
			if p := op.Events[i-1]; p.Kind == lk.EventGrant && p.Lock == e.Lock && p.Token == e.Token-1 &&
				p.Mode == lk.Shared && e.Mode == lk.Shared && p.At == e.At {
				e.Predecessors = p.Predecessors
				continue
			}
		}
		if e.Mode == lk.Exclusive {
			if i := slices.IndexFunc(op.foreseen, func(f foreseen) bool { return f.lock == e.Lock && f.token == e.Token }); i >= 0 {
				e.Predecessors = nonEmpty(op.foreseen[i].predecessors)
				continue
			}
		}
		ps, err := repo.GrantPredecessors(op.Tx, e.Lock, e.Token, e.At, e.Mode, maxPredecessors)
		if err != nil {
			return err
		}
		e.Predecessors = ps
	}
	op.explained = len(op.Events)
	return nil
}

// nonEmpty is ps, or nil when it has none: as GrantPredecessors returns
// them.
func nonEmpty(ps []lk.Predecessor) []lk.Predecessor {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// grantedTo returns the predecessors of the grant of lock to client among
// the current operation's events.
func grantedTo(op *Op, client, lock string) []lk.Predecessor {
	for i := len(op.Events) - 1; i >= 0; i-- {
		e := op.Events[i]
		if e.Kind == lk.EventGrant && e.Client == client && e.Lock == lock {
			return e.Predecessors
		}
	}
	return nil
}

// Predecessors returns the predecessors of lock's grant of token (nil
// without Config.Explain): for a blocked acquire told of its grant by
// another server, whose notification does not carry them. The grant's
// commit holds them, so a read apart sees them.
func Predecessors(op *Op, lock string, token int64) ([]lk.Predecessor, error) {
	if !op.Config.Explain {
		return nil, nil
	}
	g, found, err := repo.GrantGet(op.Tx, lock, token)
	if err != nil || !found {
		return nil, err
	}
	return repo.GrantPredecessors(op.Tx, lock, token, g.GrantedAt, g.Mode, maxPredecessors)
}

// LastAbort returns client's last abort while it is unregistered (nil
// without Config.Explain, once it registered again, or when history no
// longer keeps it): for a blocked acquire that learns of its abort by
// reading the state, or from another server.
func LastAbort(op *Op, client string) (*lk.Abort, error) {
	if !op.Config.Explain {
		return nil, nil
	}
	registered, err := repo.ClientRegistered(op.Tx, client)
	if err != nil || registered {
		return nil, err
	}
	return lastAbort(op.Tx, client)
}

func lastAbort(tx *repo.Tx, client string) (*lk.Abort, error) {
	a, found, err := repo.AbortLatest(tx, client)
	if err != nil || !found {
		return nil, err
	}
	return &lk.Abort{Victim: &a.Client, Age: a.Age, Cycle: a.Cycle}, nil
}

// recordAbort keeps a victim's abort for its status (docs/api.md).
func recordAbort(op *Op, requester, lock string, ab lk.Abort) error {
	if !op.Config.Explain {
		return nil
	}
	return repo.AbortInsert(op.Tx, repo.AbortRow{Client: *ab.Victim, Age: ab.Age, AbortedAt: op.Now,
		Requester: requester, Lock: lock, Cycle: ab.Cycle})
}

// pruneAborts deletes a batch of the aborts older than before, and reports
// whether the batch was full.
func pruneAborts(op *Op, before int64) (full bool, err error) {
	if !op.Config.Explain {
		return false, nil
	}
	n, err := repo.AbortsPruneBefore(op.Tx, before, abortPruneBatch)
	return n == abortPruneBatch, err
}

// abortedMessage is the message of a renew by client of its lease on lock
// that it lost as a deadlock victim, "" when it did not (or history no
// longer tells): the error code stays not_holder.
func abortedMessage(op *Op, client, lock string) (string, error) {
	if !op.Config.Explain {
		return "", nil
	}
	tx := op.Tx
	registered, err := repo.ClientRegistered(tx, client)
	if err != nil || registered {
		return "", err
	}
	a, found, err := repo.AbortLatest(tx, client)
	if err != nil || !found {
		return "", err
	}
	lost, err := repo.GrantLostInAbort(tx, client, lock, a.AbortedAt)
	if err != nil || !lost {
		return "", err
	}
	return client + " holds no live lease on " + lock + ": it lost it at " + strconv.FormatInt(a.AbortedAt, 10) +
		" when it was aborted as a deadlock victim (GET /v1/status?client=" + client + " says why)", nil
}

// explainStatus adds to a status answer the client's last abort, while it is
// unregistered, and the estimated wait of the lock it waits for.
func explainStatus(op *Op, out *lk.StatusResult) error {
	if !op.Config.Explain {
		return nil
	}
	tx := op.Tx
	if out.Age == 0 {
		var err error
		out.Aborted, err = lastAbort(tx, out.Client)
		return err
	}
	if out.Waiting == nil {
		return nil
	}
	rank := out.Waiting.Position
	if rank == 0 {
		var err error
		if rank, err = repo.QueueRank(tx, out.Client); err != nil {
			return err
		}
	}
	var err error
	out.Waiting.EstimatedWait, err = queuedEstimate(op, out.Client, out.Waiting.Lock, rank)
	return err
}

// queuedEstimate is the estimated wait of client, queued at rank for lock:
// none past estimateHorizon.
func queuedEstimate(op *Op, client, lock string, rank int64) (*float64, error) {
	if !op.Config.Explain || rank < 1 || rank > estimateHorizon {
		return nil, nil
	}
	modes, err := repo.QueueModesThrough(op.Tx, client, estimateHorizon)
	if err != nil || len(modes) == 0 {
		return nil, err
	}
	waits, err := estimateWaits(op.Tx, lock, op.Now, modes)
	if err != nil || waits == nil {
		return nil, err
	}
	return waits[len(waits)-1], nil
}

// explainQueue adds the estimated waits to an inspect answer, or page: to
// its waiters within estimateHorizon of the head, from the modes of the
// queue's first entries (a page may start past the head).
func explainQueue(op *Op, in *lk.InspectResult) error {
	if !op.Config.Explain || len(in.Queue) == 0 || in.Queue[0].Position > estimateHorizon {
		return nil
	}
	var modes []lk.Mode
	if in.Queue[0].Position == 1 {
		for _, w := range in.Queue[:min(len(in.Queue), estimateHorizon)] {
			modes = append(modes, w.Mode)
		}
	} else {
		var err error
		if modes, err = repo.QueueModesHead(op.Tx, in.Lock, estimateHorizon); err != nil {
			return err
		}
	}
	waits, err := estimateWaits(op.Tx, in.Lock, op.Now, modes)
	if err != nil || waits == nil {
		return err
	}
	for i, w := range in.Queue {
		if w.Position <= int64(len(waits)) {
			in.Queue[i].EstimatedWait = waits[w.Position-1]
		}
	}
	return nil
}

// estimateWaits estimates, at now, how long each of the first len(modes)
// entries of lock's queue (their modes, from the head) still waits: nil
// when the lock has no ended lease to learn from. docs/api.md says how:
//
//   - a hold lasts the mean of the lock's last holdSample ended leases of
//     its mode (of all of them, when none of them had that mode);
//   - the current holders leave when the last of them reaches its mean
//     hold, or at its expiry if that comes first (now, if both are past);
//   - then the queue is served in turns: an exclusive entry is a turn, a
//     run of consecutive shared entries is one turn, each a mean hold long.
func estimateWaits(tx *repo.Tx, lock string, now int64, modes []lk.Mode) ([]*float64, error) {
	holds, err := repo.GrantHoldTimes(tx, lock, holdSample)
	if err != nil || len(holds) == 0 {
		return nil, err
	}
	holders, err := repo.LockHoldersByMode(tx, lock)
	if err != nil {
		return nil, err
	}
	return waitsFrom(holds, holders, now, modes), nil
}

// waitsFrom is estimateWaits from the lock's hold times and holders, read:
// nil without hold times.
func waitsFrom(holds []repo.HoldTime, holders []repo.HoldersByMode, now int64, modes []lk.Mode) []*float64 {
	if len(holds) == 0 {
		return nil
	}
	sum, n := map[lk.Mode]float64{}, map[lk.Mode]int{}
	var all float64
	for _, h := range holds {
		sum[h.Mode] += float64(h.Held)
		n[h.Mode]++
		all += float64(h.Held)
	}
	mean := func(m lk.Mode) float64 {
		if n[m] == 0 {
			return all / float64(len(holds))
		}
		return sum[m] / float64(n[m])
	}
	var start float64 // when the current turn starts, from now
	for _, h := range holders {
		left := min(float64(h.LastGrantedAt)+mean(h.Mode), float64(h.LastExpiresAt)) - float64(now)
		start = max(start, left)
	}
	out := make([]*float64, len(modes))
	for i, m := range modes {
		if i > 0 && !(m == lk.Shared && modes[i-1] == lk.Shared) {
			start += mean(modes[i-1])
		}
		w := math.Round(start*10) / 10
		out[i] = &w
	}
	return out
}
