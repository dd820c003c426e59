-- +goose Up

-- The grants table of 00003, rebuilt with the same columns, rows and
-- indexes, and the same check on ended written as comparisons. SQLite
-- tests `x IN (list)` of more than two constants in a CHECK by building a
-- temporary B-tree of the list, at every INSERT into grants and every
-- UPDATE of ended: about a third of the cost of writing a grant's row
-- (docs/performance.md, "Cost of the grant history"). The comparisons
-- accept and refuse exactly what the list did, NULL (a live lease)
-- included. mode's check has two values, which SQLite already compares.
--
-- Dropping the old table drops its indexes, so every index on grants of
-- the migrations before this one is created again below: one added
-- there must be added here too (TestSchemaMatchesMigrations shows it).
ALTER TABLE grants RENAME TO grants_before_00006;
CREATE TABLE grants (
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
INSERT INTO grants (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_before_00006;
DROP TABLE grants_before_00006;
CREATE INDEX grants_by_client ON grants (client, granted_at, lock, token);
CREATE INDEX grants_by_end ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_order ON grants (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;

-- +goose Down
ALTER TABLE grants RENAME TO grants_after_00006;
CREATE TABLE grants (
    lock       TEXT NOT NULL,
    token      INTEGER NOT NULL,
    client     TEXT NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER,
    ended      TEXT CHECK (ended IN ('released', 'lapsed', 'revoked', 'aborted')),
    ended_after_token INTEGER,
    PRIMARY KEY (lock, token)
) WITHOUT ROWID;
INSERT INTO grants (lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token)
SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_after_00006;
DROP TABLE grants_after_00006;
CREATE INDEX grants_by_client ON grants (client, granted_at, lock, token);
CREATE INDEX grants_by_end ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;
CREATE INDEX grants_ended_by_lock_order ON grants (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;
