package repo

// What only PostgreSQL needs besides its SQL (dialect_postgres.go): opening
// a database with peers, telling a lost connection from a bug and replacing it,
// and the escape of the bytes its text cannot hold.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/migrations"
)

// openPostgres opens the PostgreSQL database at the URL dsn. Servers that
// start together migrate under goose's session lock (an advisory lock), so
// exactly one applies each migration.
func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	// Every transaction holds the lock all servers queue for, so none may
	// hold it long: a server that stalls inside one (paused, partitioned)
	// has it cut off after 10 s. The writer waits for the lock for
	// ServiceLockTimeout only (serviceLockTimeout); other sessions
	// (migrations, reads) keep 10 s. The URL may set other values.
	_, urlLockTimeout := cfg.RuntimeParams["lock_timeout"]
	for k, v := range map[string]string{
		"idle_in_transaction_session_timeout": "10s",
		"lock_timeout":                        "10s",
		"application_name":                    "leasekeeper",
	} {
		if _, set := cfg.RuntimeParams[k]; !set {
			cfg.RuntimeParams[k] = v
		}
	}
	// A primary that vanished (a failover) must not hold a connection
	// attempt for the operating system's minutes.
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	trips := &roundTrips{}
	cfg.Tracer = trips // the writer's only: readers and the listener copy cfg without it
	sdb := sqlx.NewDb(stdlib.OpenDB(*cfg), "pgx")
	// Operations are serialized per process anyway (package service); a
	// second connection would only hold a second snapshot.
	sdb.SetMaxOpenConns(1)
	locker, err := lock.NewPostgresSessionLocker()
	if err == nil {
		var p *goose.Provider
		p, err = goose.NewProvider(goose.DialectPostgres, sdb.DB, migrations.Postgres(), goose.WithSessionLocker(locker))
		if err == nil {
			err = migrate(ctx, p)
		}
	}
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	conn, err := sdb.Connx(ctx)
	if err != nil {
		sdb.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	d, err := newDB(sdb, conn, postgresDialect{})
	var schema string
	if err == nil {
		d.pgcfg, d.lockTimeout, d.trips = cfg, !urlLockTimeout, trips
		err = d.serviceLockTimeout(ctx)
	}
	if err == nil {
		err = conn.GetContext(ctx, &schema, d.texts[qCurrentSchema])
	}
	if err != nil {
		conn.Close()
		sdb.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	d.channel = notifyChannel(schema)
	return d, nil
}

// ServiceLockTimeout bounds how long the writer's transaction waits for the
// service row (Lock) before it fails as unavailable, rolled back with
// nothing done: a peer that holds the row for long, its connection to the
// database slow, must not hold this server's requests past their clients'
// patience (10 s), and each request may queue behind one group's wait
// before its own. A healthy peer holds the row for milliseconds.
const ServiceLockTimeout = 2 * time.Second

// serviceLockTimeout sets ServiceLockTimeout on the writer's connection,
// unless the URL sets lock_timeout. Every lock the writer waits for is the
// service row's: it takes that first, and with it every other.
func (d *DB) serviceLockTimeout(ctx context.Context) error {
	if !d.lockTimeout {
		return nil
	}
	_, err := d.conn.ExecContext(ctx, fmt.Sprintf("SET lock_timeout = %d", ServiceLockTimeout.Milliseconds()))
	return err
}

// notifyChannel names the channel for schema: "leasekeeper." and the
// schema's name, or, when that would pass PostgreSQL's 63-byte identifiers,
// a hash of it.
func notifyChannel(schema string) string {
	c := "leasekeeper." + schema
	if len(c) > 63 {
		sum := sha256.Sum256([]byte(schema))
		c = "leasekeeper." + hex.EncodeToString(sum[:20])
	}
	return c
}

// recover replaces the connection after a failure, if it is gone: after a
// failover, or a restart of PostgreSQL, the server goes on with a new one.
func (d *DB) recover(ctx context.Context) error {
	if !d.suspect {
		return nil
	}
	if !d.replace {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := d.conn.PingContext(pctx)
		cancel()
		if err == nil {
			d.suspect = false
			return nil
		}
	}
	d.closeStmts()
	// Closing a Conn only hands it back to the pool; a Raw that answers
	// ErrBadConn makes database/sql close it for good.
	d.conn.Raw(func(any) error { return driver.ErrBadConn })
	d.conn.Close()
	d.replace = false
	conn, err := d.db.Connx(ctx)
	if err != nil {
		// d.conn stays the closed one: the next Begin tries again.
		return fmt.Errorf("%w: %w: %v", lk.ErrUnavailable, ErrDatabaseDown, err)
	}
	d.conn, d.suspect = conn, false
	if err := d.serviceLockTimeout(ctx); err != nil {
		d.suspect, d.replace = true, true // a ping would not set it
		return fmt.Errorf("%w: %w: %v", lk.ErrUnavailable, ErrDatabaseDown, err)
	}
	return nil
}

// failed notes a statement's error and tells a lost database from a bug
// (dialect.failed): the database's absence comes back wrapped in
// lk.ErrUnavailable.
func (d *DB) failed(err error) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) {
		return err
	}
	mapped, suspect, replace := d.dialect.failed(err)
	d.suspect = d.suspect || suspect
	d.replace = d.replace || replace
	return mapped
}

// lostConnection reports whether err, not an answer of the server, says
// that the connection broke or could not be made.
func lostConnection(err error) bool {
	var ne net.Error
	var ce *pgconn.ConnectError
	return errors.As(err, &ne) || errors.As(err, &ce) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "conn busy")
}

// PostgreSQL's text cannot hold the byte 0, which the contract allows in
// names, keys and values. On PostgreSQL every string goes in escaped, 0 as
// 1 1 and 1 as 1 2, and comes out unescaped. The escape keeps the byte-wise
// order of names (ORDER BY under COLLATE "C"): the codes of 0 and 1 sort
// below every other byte and in their order, and no code is a prefix of
// another. Other strings, all but the oddest, are stored as they are.

func (tx *Tx) encode(args []any) []any {
	if !tx.d.dialect.escapesText() {
		return args
	}
	var out []any
	for i, a := range args {
		if s, ok := a.(string); ok && strings.ContainsAny(s, "\x00\x01") {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[i] = escapeText(s)
		}
	}
	if out == nil {
		return args
	}
	return out
}

// decode unescapes every string that dests (pointers, to strings, structs
// or slices of structs, as Scan and Select fill them) hold.
func (tx *Tx) decode(dests ...any) {
	if !tx.d.dialect.escapesText() {
		return
	}
	for _, d := range dests {
		unescapeValue(reflect.ValueOf(d))
	}
}

func unescapeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			unescapeValue(v.Elem())
		}
	case reflect.String:
		if s := v.String(); strings.IndexByte(s, 1) >= 0 && v.CanSet() {
			v.SetString(unescapeText(s))
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				unescapeValue(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			unescapeValue(v.Index(i))
		}
	}
}

func escapeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case 0:
			b.WriteString("\x01\x01")
		case 1:
			b.WriteString("\x01\x02")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func unescapeText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 1 && i+1 < len(s) {
			i++
			b.WriteByte(s[i] - 1)
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
