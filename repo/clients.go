package repo

var qClientRegister = portable("ClientRegister", `INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`)

// ClientRegister registers name with the given age (D1).
func ClientRegister(tx *Tx, name string, age, now int64) error {
	err := tx.write(qClientRegister, age, name, now)
	return err
}

var qClientDelete = portable("ClientDelete", `DELETE FROM clients WHERE name = ?`)

// ClientDelete unregisters a client (D4.3).
func ClientDelete(tx *Tx, name string) error {
	err := tx.write(qClientDelete, name)
	return err
}

var qClientWaitingFor = portable("ClientWaitingFor", `SELECT lock FROM queue_entries WHERE client = ?`)

// ClientWaitingFor returns the lock client is queued for; "" when it waits
// for none.
func ClientWaitingFor(tx *Tx, client string) (string, error) {
	var lock string
	_, err := tx.row(qClientWaitingFor, []any{client}, &lock)
	return lock, err
}

var qClientRegistered = portable("ClientRegistered", `SELECT 1 FROM clients WHERE name = ?`)

// ClientRegistered reports whether client is registered (D1).
func ClientRegistered(tx *Tx, client string) (bool, error) {
	var one int
	return tx.row(qClientRegistered, []any{client}, &one)
}
