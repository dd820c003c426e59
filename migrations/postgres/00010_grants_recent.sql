-- +goose Up

-- The same as migrations/sqlite/00010_grants_recent.sql, which says why.
ALTER TABLE grants RENAME TO grants_archive;
DELETE FROM grants_archive WHERE ended IS NULL;
DROP INDEX grants_ended_by_lock;
DROP INDEX grants_ended_by_lock_time;
CREATE TABLE grants_recent (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lock       TEXT COLLATE "C" NOT NULL,
    token      BIGINT NOT NULL,
    client     TEXT COLLATE "C" NOT NULL,
    mode       TEXT NOT NULL,
    granted_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at   BIGINT NOT NULL,
    ended      TEXT NOT NULL,
    ended_after_token BIGINT
);
CREATE INDEX grants_recent_by_lock ON grants_recent (lock, token);
CREATE INDEX grants_recent_ended_after ON grants_recent (lock, ended_after_token, ended_at, token);
CREATE INDEX leases_by_token ON leases (lock, token);
CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           CAST(NULL AS BIGINT) AS ended_at, CAST(NULL AS TEXT) AS ended, CAST(NULL AS BIGINT) AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_archive;

-- +goose Down
DROP VIEW grants;
DROP INDEX leases_by_token;
INSERT INTO grants_archive (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_recent
    ON CONFLICT (lock, token) DO NOTHING;
INSERT INTO grants_archive (lock, token, client, mode, granted_at, expires_at)
    SELECT lock, token, client, mode, granted_at, expires_at FROM leases
    ON CONFLICT (lock, token) DO NOTHING;
DROP TABLE grants_recent;
ALTER TABLE grants_archive RENAME TO grants;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;
