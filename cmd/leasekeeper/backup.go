package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasekeeper/leasekeeper/repo"
)

func newBackupCmd() *cobra.Command {
	var dbPath string
	cmd := &cobra.Command{
		Use:   "backup [--db FILE] OUT",
		Short: "Write a consistent copy of the database, also while the server runs",
		Long: `backup writes a consistent copy of the lock state to OUT, a file that must not
exist yet. The server may go on running: the copy holds exactly the
transactions committed when the backup started (SQLite's VACUUM INTO on a WAL
database), compacted, in one self-contained file.

To restore: stop the server, move the database file aside together with its
-wal and -shm files (keep its .mark), copy the backup to the database's
name, and start the server once with --accept-rollback: the copy is behind
the tokens the server issued since, and without the flag it refuses to
start (docs/operations.md). Leases that ran out in the meantime are retired
at their own expiry, and their locks handed over at those instants, as
after any restart.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if repo.IsPostgres(dbPath) {
				return usageError{fmt.Errorf("backup copies a SQLite file; back up a PostgreSQL database with pg_dump or pg_basebackup (docs/deployment.md)")}
			}
			if err := repo.Backup(cmd.Context(), dbPath, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up %s to %s\n", dbPath, args[0])
			return nil
		},
	}
	cmd.Flags().StringVar(&dbPath, "db", "leasekeeper.db", "the database to copy")
	return cmd
}
