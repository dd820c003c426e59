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
// an overwrite of blocks already written). SQLite never shrinks the WAL
// (journal_size_limit stays -1): once it held wal_autocheckpoint pages, a
// checkpoint lets it start again from its first frame, over the same
// blocks. So a server spent its first seconds of load, after every start,
// at the slower rate (docs/performance.md, "SQLite: the WAL written
// ahead"). growWAL writes that size of zeros up front, real blocks rather
// than fallocate's unwritten extents, which a write converts, in the same
// journal, at about the append's cost.
//
// Zeros are not frames: SQLite reads a WAL from its header through its
// frames until one's salt and checksum do not match its header's, which
// no zero frame does, so a crash leaves the same valid frames as before. A
// WAL whose header is zeros is an empty one.

// walHeader and walFrameHeader are the sizes of SQLite's WAL header and of
// each frame's header, in bytes.
const (
	walHeader      = 32
	walFrameHeader = 24
)

// growWAL extends the writer's WAL with zeros to the size it reaches before
// its first checkpoint, if it is smaller. It must run before the first
// write transaction: it writes only past the file's end, where SQLite has
// written nothing yet. The file system may refuse the room (a full disk):
// the zeros written are taken back, and SQLite grows the file as it always
// did; a disk without room for the WAL fails writes the same way either
// way (ErrDiskFull).
func (d *DB) growWAL(ctx context.Context, path string) error {
	var pageSize int64
	if err := d.conn.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return err
	}
	want := walHeader + walAutocheckpoint*(pageSize+walFrameHeader)
	f, err := os.OpenFile(path+"-wal", os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil // SQLite creates it at the first write, and it grows
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() >= want {
		return err
	}
	zeros := make([]byte, 1<<20)
	for at := st.Size(); at < want && err == nil; at += int64(len(zeros)) {
		n := min(int64(len(zeros)), want-at)
		_, err = f.WriteAt(zeros[:n], at)
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
