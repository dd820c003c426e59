-- +goose Up

-- The same table as migrations/sqlite/00003_grants.sql, which says what
-- each column means.
CREATE TABLE grants (
    lock       TEXT COLLATE "C" NOT NULL,
    token      BIGINT NOT NULL,
    client     TEXT COLLATE "C" NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    granted_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at   BIGINT,
    ended      TEXT CHECK (ended IN ('released', 'lapsed', 'revoked', 'aborted')),
    PRIMARY KEY (lock, token)
);
CREATE INDEX grants_by_client ON grants (client, granted_at, lock, token);
CREATE INDEX grants_by_end ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;

INSERT INTO grants (lock, token, client, mode, granted_at, expires_at)
SELECT lock, token, client, mode, granted_at, expires_at FROM leases;

-- +goose Down
DROP TABLE grants;
