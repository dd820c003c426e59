// Package migrations embeds the goose migrations of each SQL dialect, one
// directory per dialect with matching version numbers: version N means the
// same tables on both. A database is brought to the latest version when it is
// opened (repo.Open).
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// SQLite is the migration set for SQLite, rooted at its directory.
func SQLite() fs.FS { return sub("sqlite") }

// Postgres is the migration set for PostgreSQL, rooted at its directory.
func Postgres() fs.FS { return sub("postgres") }

func sub(dir string) fs.FS {
	s, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // the directory is embedded above; it cannot be missing
	}
	return s
}
