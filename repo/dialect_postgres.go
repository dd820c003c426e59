package repo

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	lk "github.com/leasekeeper/leasekeeper"
)

// postgresDialect is PostgreSQL: a database that several servers share
// (peers), over a network.
type postgresDialect struct{}

func (postgresDialect) String() string { return "postgres" }

// bind writes ?N and the n-th bare ? as $N.
func (postgresDialect) bind(text string, ps []param) string {
	var b strings.Builder
	b.Grow(len(text) + len(ps))
	last := 0
	for _, p := range ps {
		b.WriteString(text[last:p.start])
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(p.n))
		last = p.end
	}
	b.WriteString(text[last:])
	return b.String()
}

// byteCollation: "C" compares with strcmp(); the name columns have it
// (migrations/postgres).
func (postgresDialect) byteCollation() string { return `COLLATE "C"` }

// begin: the caller takes the lock, the service row's, with Lock.
func (postgresDialect) begin() string { return `BEGIN` }

// serviceCounters: the stored counter is exact, for a database with peers'
// service writes it whenever it changes; the clients table is not read.
func (postgresDialect) serviceCounters() string {
	return `SELECT clock, last_client_age, event_id, token_floor FROM service WHERE id = 1`
}

// lockGrant: one statement, a round trip less than two: the counter, the
// lease (its grant's row in the history while it lives), and the pruning
// of the lock's history that the new token allows (repo/grants.go; ?7 is
// historyPruneBound, 0 while nothing is pruned).
func (postgresDialect) lockGrant(newLock bool) string {
	counter := `UPDATE locks SET last_token = last_token + 1 WHERE name = ?1`
	if newLock {
		counter = `INSERT INTO locks (name, last_token) VALUES (?1, ?4)`
	}
	return `WITH counter AS (` + counter + `),
			pruned AS (DELETE FROM grants_ended WHERE lock = ?1 AND token <= CAST(?7 AS BIGINT))
			INSERT INTO leases (lock, client, mode, token, granted_at, expires_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
}

// leaseRenew, leaseEnd: one statement each, where SQLite runs two or three.
// The ended grant's row comes from the lease's own data-modifying WITH.
func (postgresDialect) leaseRenew() string {
	return `UPDATE leases SET expires_at = ?1 WHERE lock = ?2 AND client = ?3 RETURNING token, granted_at`
}

func (postgresDialect) leaseEnd() string {
	return `WITH l AS (DELETE FROM leases WHERE lock = ?1 AND client = ?2 RETURNING mode, token, granted_at, expires_at),
			g AS (INSERT INTO grants_ended (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
				SELECT ?1, token, ?2, mode, granted_at, expires_at, ?4, ?3, (SELECT last_token FROM locks WHERE name = ?1) FROM l)
			SELECT mode, token, granted_at, expires_at, (SELECT queue_length FROM locks WHERE name = ?1) FROM l`
}

func (postgresDialect) lockServiceRow() string {
	return `SELECT clock, last_client_age, event_id, token_floor FROM service WHERE id = 1 FOR UPDATE`
}

func (postgresDialect) clock() string {
	return `SELECT extract(epoch FROM clock_timestamp())::float8`
}

func (postgresDialect) notify() string        { return `SELECT pg_notify(?, ?)` }
func (postgresDialect) currentSchema() string { return `SELECT current_schema()` }

func (postgresDialect) listen(channel string) string {
	return `LISTEN ` + pgx.Identifier{channel}.Sanitize()
}

// backupVersion, backupInto: Backup copies a SQLite file; a PostgreSQL
// database is backed up with PostgreSQL's tools.
func (postgresDialect) backupVersion() string { return "" }
func (postgresDialect) backupInto() string    { return "" }

// readBegin: REPEATABLE READ, one snapshot for the statements of a read;
// READ ONLY takes no lock on the service row, the one every writer of
// every server queues for.
func (postgresDialect) readBegin() string { return `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY` }

func (postgresDialect) notifyEventID() string {
	return `WITH c AS (UPDATE service SET event_id = ?3 WHERE id = 1) SELECT pg_notify(?1, ?2)`
}

// indexedBy: PostgreSQL's planner takes no hints, and needs none here.
func (postgresDialect) indexedBy(string) string { return "" }

func (postgresDialect) peers() bool       { return true }
func (postgresDialect) pipelines() bool   { return true }
func (postgresDialect) escapesText() bool { return true }

// readDeadline bounds a read apart as the engine's transaction deadline
// bounds a write: a database that stalls must not hold a handler forever.
func (postgresDialect) readDeadline() time.Duration { return 15 * time.Second }

func (postgresDialect) pagesRead(*sqlx.Conn) (int64, error) { return 0, nil }

// failed: an error of the connection, of a failover or of a timeout is the
// database's absence. Any error may have left the connection unusable: the
// next Begin checks it.
func (postgresDialect) failed(err error) (mapped error, suspect, replace bool) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "57"): // operator intervention: shutdown, cancel
			return fmt.Errorf("%w: %w: %v", lk.ErrUnavailable, ErrDatabaseDown, err), true, false
		case pe.Code == "55P03", // lock_not_available: lock_timeout
			pe.Code == "25P03", // idle_in_transaction_session_timeout
			pe.Code == "40001", pe.Code == "40P01":
			return fmt.Errorf("%w: %v", lk.ErrUnavailable, err), true, false
		case pe.Code == "25006": // read_only_sql_transaction: a standby, after a failover
			return fmt.Errorf("%w: %w: %v", lk.ErrUnavailable, ErrDatabaseDown, err), true, true
		}
		return err, true, false
	}
	if lostConnection(err) {
		return fmt.Errorf("%w: %w: %v", lk.ErrUnavailable, ErrDatabaseDown, err), true, false
	}
	return err, true, false // a bug of ours, not the database's absence
}

// checkpoint: PostgreSQL's own; a commit that succeeded is on the server.
func (postgresDialect) checkpoint() string { return "" }
