package repo

import "database/sql"

// Client is a registered client's row.
type Client struct {
	Age        int64
	WaitingFor string // "" when not waiting
}

// ClientGet returns a registered client; found is false for an unregistered one.
func ClientGet(tx *Tx, name string) (c Client, found bool, err error) {
	var w sql.NullString
	found, err = tx.row(`SELECT age, waiting_for FROM clients WHERE name = ?`, []any{name}, &c.Age, &w)
	c.WaitingFor = w.String
	return c, found, err
}

// ClientRegister registers name and returns its age (D1).
func ClientRegister(tx *Tx, name string, now int64) (age int64, err error) {
	_, err = tx.row(`INSERT INTO clients (name, registered_at) VALUES (?, ?) RETURNING age`,
		[]any{name, now}, &age)
	return age, err
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
