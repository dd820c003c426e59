package repo

import (
	"errors"

	"modernc.org/sqlite"
)

// PagesRead returns how many database pages the connection's statements have
// read so far, from SQLite's page cache or through it: the B-tree pages every
// lookup, scan and write walks. Unlike time it does not vary from run to run,
// so a test can show that an operation's work does not grow with something it
// should not touch (docs/performance.md). On PostgreSQL it returns 0.
func (d *DB) PagesRead() (int64, error) {
	if d.postgres() {
		return 0, nil
	}
	var pages int64
	err := d.conn.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return errors.New("repo: the SQLite driver does not report page counts")
		}
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			n, _, err := st.Status(op, false)
			if err != nil {
				return err
			}
			pages += int64(n)
		}
		return nil
	})
	return pages, err
}
