// Package sqlitetest helps tests change a SQLite file behind the back of
// the server that has it open: a connection of its own, as an operator's
// sqlite3 would be. It imports nothing of the project's but its driver,
// so that the tests of every package can use it.
package sqlitetest

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

// Exec runs stmt on the SQLite file at path from a connection of its own.
func Exec(t testing.TB, path, stmt string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}
