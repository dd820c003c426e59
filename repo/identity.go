package repo

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
)

var qServiceID = portable("ServiceID", `SELECT service_id FROM service WHERE id = 1`)

// ServiceID reads the service's identity (migration 00008): 32 hex digits,
// created with the database, the key under which package fence keeps the
// tokens this service granted.
func ServiceID(tx *Tx) (string, error) {
	var id sql.NullString
	if _, err := tx.row(qServiceID, nil, &id); err != nil {
		return "", err
	}
	if !id.Valid || id.String == "" {
		return "", errors.New("the service row has no service_id")
	}
	return id.String, nil
}

// newServiceID is a fresh identity, as the migration makes one.
func newServiceID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var qServiceIDSet = portable("ServiceIDSet", `UPDATE service SET service_id = ? WHERE id = 1`)

// serviceIDVersion is the migration that adds the identity.
const serviceIDVersion = 8

// renewServiceID gives the SQLite database at path (a backup's copy, no
// one else's yet) an identity of its own. A copy's tokens fork from its
// original's the moment it is made: restored, it issues again tokens the
// original went on to issue after it, which must not be checked against
// the fence rows those wrote. A copy of a database older than the identity
// gets one when it is opened and migrated.
func renewServiceID(ctx context.Context, path string, version int64) error {
	if version < serviceIDVersion {
		return nil
	}
	q, err := qServiceIDSet.textIn(sqliteDialect{})
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", "file:"+escapePath(path)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, q, newServiceID()); err != nil {
		return fmt.Errorf("giving the copy an identity of its own: %w", err)
	}
	return db.Close()
}
