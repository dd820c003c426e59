package service

import "github.com/leasekeeper/leasekeeper/repo"

// Summary is the state a server logs when it starts (docs/deployment.md):
// its clock, how many locks the database knows and the highest fencing
// token it issued. None of them ever goes down while the database is
// intact, so a lower figure than at the previous start shows that the file
// went back in time: a -wal deleted or damaged after a crash, or an old
// copy restored. Tokens may then be issued twice.
type Summary struct {
	repo.Summary
	Clock    int64
	ClockSet bool // false before the first operation
}

// ReadSummary reads the database's summary without changing anything (no
// clock advance, no lapses).
func ReadSummary(tx *repo.Tx) (Summary, error) {
	c, err := repo.ServiceCounters(tx)
	if err != nil {
		return Summary{}, err
	}
	sum, err := repo.DatabaseSummary(tx)
	// After an accepted rollback the floor is a token issued, whether or
	// not a lock holds it yet: the mark compares the database with it.
	sum.HighestToken = max(sum.HighestToken, c.TokenFloor)
	return Summary{Summary: sum, Clock: c.Clock, ClockSet: c.ClockSet}, err
}
