-- +goose Up

-- Grant history: one row per fencing token ever granted, written in the
-- transaction that grants or ends the lease. expires_at follows renewals
-- while the lease is live. ended says how it ended (NULL while live), and
-- ended_at when: the release's, revoke's or abort's ts, or for a lapse its
-- expires_at, the hand-over instant (L3), not the moment it was noticed.
-- Rows are pruned (serve --history-keep, --history-days); a live lease's
-- row never is.
CREATE TABLE grants (
    lock       TEXT NOT NULL,
    token      INTEGER NOT NULL,
    client     TEXT NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER,
    ended      TEXT CHECK (ended IN ('released', 'lapsed', 'revoked', 'aborted')),
    PRIMARY KEY (lock, token)
) WITHOUT ROWID;
-- A client's history, newest first (GET /v1/history?client=).
CREATE INDEX grants_by_client ON grants (client, granted_at, lock, token);
-- Pruning, which deletes only ended rows: by age, and per lock beyond its
-- last --history-keep tokens. Live rows are in neither index, so that a
-- prune never steps over the rows of a crowd of live shared leases.
CREATE INDEX grants_by_end ON grants (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX grants_ended_by_lock ON grants (lock, token) WHERE ended IS NOT NULL;

-- Servers upgraded one by one share the database: the leases live now
-- get their rows here, so that every server's history agrees.
INSERT INTO grants (lock, token, client, mode, granted_at, expires_at)
SELECT lock, token, client, mode, granted_at, expires_at FROM leases;

-- +goose Down
DROP TABLE grants;
