// Package migrations embeds the goose migrations of each SQL dialect. A
// database is brought to the latest version when it is opened (repo.Open).
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql
var files embed.FS

// SQLite is the migration set for SQLite, rooted at its directory.
func SQLite() fs.FS {
	sub, err := fs.Sub(files, "sqlite")
	if err != nil {
		panic(err) // the directory is embedded above; it cannot be missing
	}
	return sub
}
