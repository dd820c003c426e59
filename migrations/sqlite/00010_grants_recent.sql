-- +goose Up

-- The grant history in three places, so that an operation writes it where
-- a commit costs least (docs/performance.md, "Grant history in sequence"):
--
--   leases          the live grants: a lease's row is its grant's history
--                   row while it lives, so a grant writes no other row and
--                   a renew none at all;
--   grants_recent   the grants that ended recently, appended in sequence
--                   (seq): an end writes the page at the table's end and
--                   an entry in each of two small indexes, however many
--                   locks the commit touched;
--   grants_archive  the older ended grants (the grants table of 00003 and
--                   00006, renamed, with its indexes but two: ended rows
--                   only, it needs none apart for them, and the last to
--                   end are read in the order of grants_ended_by_lock_order
--                   as in grants_recent), into which an
--                   operation moves recent rows of one lock at a time,
--                   many of them together, once grants_recent spans more
--                   than a bound (service/history.go).
--
-- The view grants puts them together again, with the columns the table had,
-- for whoever reads the file with sqlite3: every grant is there from the
-- commit that made it. leases_by_token lets the readers walk a lock's live
-- grants by token, as they walk its ended ones.
ALTER TABLE grants RENAME TO grants_archive;
DELETE FROM grants_archive WHERE ended IS NULL;
DROP INDEX grants_ended_by_lock;
DROP INDEX grants_ended_by_lock_time;
CREATE TABLE grants_recent (
    seq        INTEGER PRIMARY KEY,
    lock       TEXT NOT NULL,
    token      INTEGER NOT NULL,
    client     TEXT NOT NULL,
    mode       TEXT NOT NULL,
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER NOT NULL,
    ended      TEXT NOT NULL,
    ended_after_token INTEGER
);
CREATE INDEX grants_recent_by_lock ON grants_recent (lock, token);
CREATE INDEX grants_recent_ended_after ON grants_recent (lock, ended_after_token, ended_at, token);
CREATE INDEX leases_by_token ON leases (lock, token);
CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           NULL AS ended_at, NULL AS ended, NULL AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_archive;

-- +goose Down
DROP VIEW grants;
DROP INDEX leases_by_token;
INSERT INTO grants_archive (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    WHERE true ON CONFLICT (lock, token) DO NOTHING;
INSERT INTO grants_archive (lock, token, client, mode, granted_at, expires_at)
    SELECT lock, token, client, mode, granted_at, expires_at FROM leases
    WHERE true ON CONFLICT (lock, token) DO NOTHING;
DROP TABLE grants_recent;
ALTER TABLE grants_archive RENAME TO grants;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;
