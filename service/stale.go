package service

import (
	"fmt"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/repo"
)

// ReportStale records that a fence in a job's own database (package fence,
// docs/fencing.md) refused req.Client's token on req.Lock: an
// lk.EventFenceStale, which the server counts, logs and streams. It is not
// a contract operation and changes no state. The token must have been
// granted to req.Client on req.Lock (its row of grants), so that a client
// reports only about its own lock: else an *lk.Error of
// lk.CodeTokenNotGranted, as for strict fencing's writes.
func ReportStale(op *Op, req lk.StaleRequest) (lk.StaleResult, error) {
	if err := req.Validate(); err != nil {
		return lk.StaleResult{}, err
	}
	client, found, err := repo.GrantClientByToken(op.Tx, req.Lock, req.Token)
	switch {
	case err != nil:
		return lk.StaleResult{}, err
	case !found:
		return lk.StaleResult{}, lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("token %d of %s has no grant on record", req.Token, req.Lock))
	case client != req.Client:
		return lk.StaleResult{}, lk.Errorf(lk.CodeTokenNotGranted, fmt.Sprintf("token %d of %s was not granted to %s", req.Token, req.Lock, req.Client))
	}
	op.emit(Event{Kind: lk.EventFenceStale, Client: req.Client, Lock: req.Lock, At: op.Now,
		Token: req.Token, Highest: req.Newer, Resource: req.Resource})
	return lk.StaleResult{Outcome: lk.OK}, nil
}
