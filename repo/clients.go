package repo

import "database/sql"

// ClientRegister registers name with the given age (D1).
func ClientRegister(tx *Tx, name string, age, now int64) error {
	_, err := tx.exec(`INSERT INTO clients (age, name, registered_at) VALUES (?, ?, ?)`, age, name, now)
	return err
}

// ClientSetWaiting records the lock the client waits for ("" for none).
func ClientSetWaiting(tx *Tx, name, lock string) error {
	var v any
	if lock != "" {
		v = lock
	}
	_, err := tx.exec(`UPDATE clients SET waiting_for = ? WHERE name = ?`, v, name)
	return err
}

// ClientDelete unregisters a client (D4.3).
func ClientDelete(tx *Tx, name string) error {
	_, err := tx.exec(`DELETE FROM clients WHERE name = ?`, name)
	return err
}

// ClientWaitingFor returns the lock client is queued for; "" when it waits
// for none or is not registered.
func ClientWaitingFor(tx *Tx, client string) (string, error) {
	var w sql.NullString
	_, err := tx.row(`SELECT waiting_for FROM clients WHERE name = ?`, []any{client}, &w)
	return w.String, err
}
