package repo

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jmoiron/sqlx"
)

// Backup writes a consistent copy of the database at src to dst, a file that
// must not exist yet, while other processes (a running server) go on using
// src. VACUUM INTO reads one snapshot of a WAL database: the copy holds
// exactly the transactions committed when it started, compacted, with no WAL
// beside it.
func Backup(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("backup: %s already exists; a backup never overwrites a file", dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: %w", err)
	}
	db, err := sqlx.Open("sqlite", "file:"+escapePath(src)+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	versionSQL, err := qBackupVersion.textIn(sqliteDialect{})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	intoSQL, err := qBackupInto.textIn(sqliteDialect{})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	var version int64
	if err := db.GetContext(ctx, &version, versionSQL); err != nil {
		return fmt.Errorf("backup: %s is not a leasekeeper database: %w", src, err)
	}
	if _, err := db.ExecContext(ctx, intoSQL, dst); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}
