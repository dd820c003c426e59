package repo

import "database/sql"

// Counters are the service row: the clock and the registration counter.
type Counters struct {
	Clock         int64
	ClockSet      bool // false before the first operation
	LastClientAge int64
}

// ServiceCounters reads the service row; LastClientAge is the registration
// counter, the larger of the stored value and the youngest registered age.
func ServiceCounters(tx *Tx) (Counters, error) {
	var c Counters
	var clock sql.NullInt64
	_, err := tx.row(`SELECT clock, max(last_client_age, (SELECT coalesce(max(age), 0) FROM clients))
		FROM service WHERE id = 1`, nil, &clock, &c.LastClientAge)
	c.Clock, c.ClockSet = clock.Int64, clock.Valid
	return c, err
}

// ServiceCountersSet writes the service row.
func ServiceCountersSet(tx *Tx, c Counters) error {
	_, err := tx.exec(`UPDATE service SET clock = ?, last_client_age = ? WHERE id = 1`, c.Clock, c.LastClientAge)
	return err
}
