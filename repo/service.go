package repo

import "database/sql"

// ServiceClock returns the service's current time; ok is false before the
// first operation.
func ServiceClock(tx *Tx) (ts int64, ok bool, err error) {
	var c sql.NullInt64
	if _, err := tx.row(`SELECT clock FROM service WHERE id = 1`, nil, &c); err != nil {
		return 0, false, err
	}
	return c.Int64, c.Valid, nil
}

// ServiceClockSet moves the service's current time to ts.
func ServiceClockSet(tx *Tx, ts int64) error {
	_, err := tx.exec(`UPDATE service SET clock = ? WHERE id = 1`, ts)
	return err
}

// ServiceIsEmpty reports whether the database has never served an operation.
func ServiceIsEmpty(tx *Tx) (bool, error) {
	_, ok, err := ServiceClock(tx)
	return !ok, err
}
