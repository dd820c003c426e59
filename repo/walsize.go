package repo

import (
	"context"
	"errors"
	"os"
	"strings"
)

// A commit that syncs (synchronous=FULL) costs about twice as much while
// the WAL grows: each sync then writes the file's new size and its new
// blocks to the file system's journal too (on this project's ext4 machine,
// fdatasync took 200 to 280 µs after an append against 115 to 140 µs after
// an overwrite of blocks already written). While a writer has the file
// open, SQLite does not shrink the WAL (journal_size_limit stays -1): once
// it held wal_autocheckpoint pages, a checkpoint lets it start again from
// its first frame, over the same blocks. A clean close checkpoints and
// deletes it, so a server spent its first seconds of load after every
// start at the slower rate (docs/performance.md, "SQLite: the WAL written
// ahead"). growWAL writes that size of zeros up front, real blocks rather
// than fallocate's unwritten extents, which a write converts, in the same
// journal, at about the append's cost.
//
// Zeros are not frames: SQLite reads a WAL from its header through its
// frames until one is not valid, and a frame whose page number is 0 never
// is; a WAL whose header is zeros has the wrong magic number and is an
// empty one.

// walHeader and walFrameHeader are the sizes of SQLite's WAL header and of
// each frame's header, in bytes.
const (
	walHeader      = 32
	walFrameHeader = 24
)

// growWALWrite writes the zeros; a test makes it fail.
var growWALWrite = (*os.File).WriteAt

// growWAL extends the writer's WAL with zeros to the size it reaches before
// its first checkpoint, if it is smaller. It holds SQLite's write lock
// meanwhile (BEGIN IMMEDIATE, then a ROLLBACK of nothing), so that no
// connection, in this process or another (sqlite3), appends frames or
// truncates the WAL under it. The zeros start at the end of the last whole
// frame: a frame cut off by a crash belonged to no commit, and is not
// completed by zeros into one that could pass for valid. The file system
// may refuse the room (a full disk): the WAL is cut back to where it was,
// and SQLite grows it as it always did.
func (d *DB) growWAL(ctx context.Context) (err error) {
	var pageSize int64
	if err := d.conn.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return err
	}
	// SQLite's name for the file, which it resolved through any symlink,
	// and names its WAL after.
	var seq int
	var name, file string
	if err := d.conn.QueryRowContext(ctx, `PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		return err
	}
	if _, err := d.conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	defer func() {
		// The transaction wrote nothing: ROLLBACK only lets go of the
		// lock. Not under ctx, which a caller may have cancelled by now:
		// database/sql would not send it, and the writer's one connection
		// would stay in the transaction, holding the lock.
		if _, rerr := d.conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); err == nil {
			err = rerr
		}
	}()
	frame := pageSize + walFrameHeader
	want := walHeader + walAutocheckpoint*frame
	f, err := os.OpenFile(file+"-wal", os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // SQLite creates it at its first read, and grows it
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() >= want {
		return err
	}
	from := int64(0)
	if st.Size() >= walHeader {
		from = walHeader + (st.Size()-walHeader)/frame*frame
	}
	zeros := make([]byte, 1<<20)
	for at := from; at < want && err == nil; at += int64(len(zeros)) {
		n := min(int64(len(zeros)), want-at)
		_, err = growWALWrite(f, zeros[:n], at)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return errors.Join(err, f.Truncate(st.Size()))
	}
	return nil
}

// syncsEachCommit reports whether a synchronous setting syncs the WAL at
// every commit, where growWAL pays.
func syncsEachCommit(sync string) bool {
	s := strings.ToUpper(sync)
	return s == "FULL" || s == "EXTRA" || s == "2" || s == "3"
}
