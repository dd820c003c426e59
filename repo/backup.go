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
// beside it, and an identity of its own (renewServiceID).
func Backup(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// Created here, empty, which VACUUM INTO accepts: so the copy is its
	// owner's alone from the first byte, as the database is (prepareFile),
	// and nothing that appears meanwhile is overwritten.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("backup: %s already exists; a backup never overwrites a file", dst)
	} else if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	f.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(dst)
		}
	}()
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
	if err := renewServiceID(ctx, dst, version); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	done = true
	return nil
}
