package repo

// sqliteDialect is the SQL only SQLite reads: the embedded database, one
// process on one file (or in memory).
type sqliteDialect struct{}

func (sqliteDialect) String() string { return "sqlite" }

// bind keeps the parameters as written: the registry's syntax is SQLite's.
func (sqliteDialect) bind(text string, _ []param) string { return text }

// byteCollation: BINARY compares with memcmp().
func (sqliteDialect) byteCollation() string { return `COLLATE BINARY` }

// begin: IMMEDIATE takes SQLite's write lock at once, so a transaction never
// fails half-way for want of it.
func (sqliteDialect) begin() string { return `BEGIN IMMEDIATE` }

// serviceCounters: the registration counter is the larger of the stored
// value and the youngest registered age. The stored one is written only
// when an abort deletes a client; otherwise the youngest age is the
// counter, and registering writes no counter (docs/performance.md).
func (sqliteDialect) serviceCounters() string {
	return `SELECT clock, max(last_client_age, (SELECT coalesce(max(age), 0) FROM clients)), event_id
		FROM service WHERE id = 1`
}

// lockGrant: SQLite has no data-modifying WITH, so a grant is two
// statements (LockGrant).
func (sqliteDialect) lockGrant(bool) string { return "" }

// leaseRenew, leaseEnd: neither, for the same reason (LeaseRenew, LeaseEnd).
func (sqliteDialect) leaseRenew() string { return "" }
func (sqliteDialect) leaseEnd() string   { return "" }

// lockServiceRow, clock, notify, currentSchema, listen: a SQLite database is
// never shared; BEGIN IMMEDIATE is its lock.
func (sqliteDialect) lockServiceRow() string { return "" }
func (sqliteDialect) clock() string          { return "" }
func (sqliteDialect) notify() string         { return "" }
func (sqliteDialect) currentSchema() string  { return "" }
func (sqliteDialect) listen(string) string   { return "" }

// backupInto: VACUUM INTO reads one snapshot of a WAL database.
func (sqliteDialect) backupVersion() string {
	return `SELECT max(version_id) FROM goose_db_version`
}
func (sqliteDialect) backupInto() string { return `VACUUM INTO ?` }
