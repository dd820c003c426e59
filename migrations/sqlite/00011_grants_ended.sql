-- +goose Up

-- One place for the ended grants, with no moves (docs/performance.md,
-- "History without moves"): grants_recent, renamed grants_ended, takes the
-- rows of grants_archive and the indexes its readers range over, and the
-- archive goes. An end appends one row and writes an entry in each of four
-- indexes: by lock and token (a lock's history), by lock in end order (the
-- explanations), by client (a client's history) and by ended_at (pruning by
-- age, near the index's end). Moving rows into the archive in batches cost
-- about three scattered pages per row, in the group that moved them.
DROP VIEW grants;
ALTER TABLE grants_recent RENAME TO grants_ended;
DROP INDEX grants_recent_by_lock;
DROP INDEX grants_recent_ended_after;
INSERT INTO grants_ended (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_archive
    WHERE ended IS NOT NULL AND ended_at IS NOT NULL ORDER BY ended_at, lock, token;
DROP TABLE grants_archive;
CREATE INDEX grants_ended_by_lock ON grants_ended (lock, token);
CREATE INDEX grants_ended_by_lock_order ON grants_ended (lock, ended_after_token, ended_at, token);
CREATE INDEX grants_ended_by_client ON grants_ended (client, granted_at, lock, token);
CREATE INDEX grants_ended_by_end ON grants_ended (ended_at);
CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           NULL AS ended_at, NULL AS ended, NULL AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_ended;

-- +goose Down
-- Every ended row stays in grants_recent, and the archive comes back
-- empty: the code of 00010 moves rows into it as it goes.
DROP VIEW grants;
DROP INDEX grants_ended_by_lock;
DROP INDEX grants_ended_by_lock_order;
DROP INDEX grants_ended_by_client;
DROP INDEX grants_ended_by_end;
ALTER TABLE grants_ended RENAME TO grants_recent;
CREATE INDEX grants_recent_by_lock ON grants_recent (lock, token);
CREATE INDEX grants_recent_ended_after ON grants_recent (lock, ended_after_token, ended_at, token);
CREATE TABLE grants_archive (
    lock       TEXT NOT NULL,
    token      INTEGER NOT NULL,
    client     TEXT NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER,
    ended      TEXT CHECK (ended = 'released' OR ended = 'lapsed' OR ended = 'revoked' OR ended = 'aborted'),
    ended_after_token INTEGER,
    PRIMARY KEY (lock, token)
) WITHOUT ROWID;
CREATE INDEX grants_by_client ON grants_archive (client, granted_at, lock, token);
CREATE INDEX grants_by_end ON grants_archive (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock_order ON grants_archive (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;
CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           NULL AS ended_at, NULL AS ended, NULL AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_archive;
