-- +goose Up

-- The same as migrations/sqlite/00011_grants_ended.sql, which says why.
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
           CAST(NULL AS BIGINT) AS ended_at, CAST(NULL AS TEXT) AS ended, CAST(NULL AS BIGINT) AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_ended;

-- +goose Down
DROP VIEW grants;
DROP INDEX grants_ended_by_lock;
DROP INDEX grants_ended_by_lock_order;
DROP INDEX grants_ended_by_client;
DROP INDEX grants_ended_by_end;
ALTER TABLE grants_ended RENAME TO grants_recent;
CREATE INDEX grants_recent_by_lock ON grants_recent (lock, token);
CREATE INDEX grants_recent_ended_after ON grants_recent (lock, ended_after_token, ended_at, token);
CREATE TABLE grants_archive (
    lock       TEXT COLLATE "C" NOT NULL,
    token      BIGINT NOT NULL,
    client     TEXT COLLATE "C" NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    granted_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at   BIGINT,
    ended      TEXT CHECK (ended IN ('released', 'lapsed', 'revoked', 'aborted')),
    ended_after_token BIGINT,
    PRIMARY KEY (lock, token)
);
CREATE INDEX grants_by_client ON grants_archive (client, granted_at, lock, token);
CREATE INDEX grants_by_end ON grants_archive (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock_order ON grants_archive (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;
CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           CAST(NULL AS BIGINT) AS ended_at, CAST(NULL AS TEXT) AS ended, CAST(NULL AS BIGINT) AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_archive;
