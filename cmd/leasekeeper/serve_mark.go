package main

import (
	"path/filepath"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/repo"
	"github.com/spf13/cobra"
)

// addMarkFlags adds serve's --mark and --accept-rollback (engine.Options.Mark,
// AcceptRollback); markFile reads them back.
func addMarkFlags(cmd *cobra.Command) {
	cmd.Flags().String("mark", "",
		"high-water mark file, kept outside the database so that a database that went back in time is noticed at start "+
			"(default: FILE.mark beside a SQLite FILE; none on PostgreSQL unless given: each server's own, on its own disk; "+
			"\"none\" turns it off)")
	cmd.Flags().Bool("accept-rollback", false,
		"start on a database that is behind its high-water mark (a restored backup, a lost -wal, a point-in-time restore): "+
			"every token, event id and client age moves past the mark")
}

// markFile is the mark serve keeps for the database at dbPath, "" for none.
func markFile(cmd *cobra.Command, dbPath string) string {
	path, _ := cmd.Flags().GetString("mark")
	switch {
	case path == "none":
		return ""
	case path != "":
		return path
	case repo.IsPostgres(dbPath) || dbPath == repo.MemoryPath:
		return ""
	}
	// Beside the file a symbolic link names, as its lock file is.
	if real, err := filepath.EvalSymlinks(dbPath); err == nil {
		dbPath = real
	}
	return dbPath + engine.MarkSuffix
}

func acceptRollback(cmd *cobra.Command) bool {
	on, _ := cmd.Flags().GetBool("accept-rollback")
	return on
}
