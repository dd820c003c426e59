package repo

// ClientRegister registers name with the given age (D1).
func ClientRegister(tx *Tx, name string, age, now int64) error {
	_, err := tx.exec(`INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`, age, name, now)
	return err
}

// ClientDelete unregisters a client (D4.3).
func ClientDelete(tx *Tx, name string) error {
	_, err := tx.exec(`DELETE FROM clients WHERE name = ?`, name)
	return err
}

// ClientWaitingFor returns the lock client is queued for; "" when it waits
// for none.
func ClientWaitingFor(tx *Tx, client string) (string, error) {
	var lock string
	_, err := tx.row(`SELECT lock FROM queue_entries WHERE client = ?`, []any{client}, &lock)
	return lock, err
}
