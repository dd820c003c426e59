// Package sqlitetest helps tests change a SQLite file behind the back of
// the server that has it open: a connection of its own, as an operator's
// sqlite3 would be. It imports nothing of the project's but its driver,
// so that the tests of every package can use it.
package sqlitetest

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"
)

// Exec runs stmt on the SQLite file at path from a connection of its own,
// as pgschema.Exec does on a PostgreSQL database, so that a test can take
// either.
func Exec(ctx context.Context, path, stmt string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %s: %w", path, stmt, err)
	}
	return nil
}
