package repo

// PagesRead returns how many database pages the connection's statements have
// read so far, from SQLite's page cache or through it: the B-tree pages every
// lookup, scan and write walks. Unlike time it does not vary from run to run,
// so a test can show that an operation's work does not grow with something it
// should not touch (docs/performance.md). On PostgreSQL it returns 0.
func (d *DB) PagesRead() (int64, error) { return d.dialect.pagesRead(d.conn) }
