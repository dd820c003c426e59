-- The schema after all migrations (migrations/sqlite), as SQLite stores it.
-- Generated: go test ./repo -run TestSchemaMatchesMigrations -update

CREATE TABLE service (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    clock           INTEGER,
    last_client_age INTEGER NOT NULL DEFAULT 0
, event_id INTEGER NOT NULL DEFAULT 0, service_id TEXT, token_floor INTEGER NOT NULL DEFAULT 0);

CREATE TABLE locks (
    name          TEXT PRIMARY KEY,
    last_token    INTEGER NOT NULL DEFAULT 0, -- highest fencing token issued
    queue_length  INTEGER NOT NULL DEFAULT 0, -- rows in queue_entries for this lock
    last_position INTEGER NOT NULL DEFAULT 0  -- highest queue position handed out
) WITHOUT ROWID;

CREATE TABLE clients (
    name          TEXT PRIMARY KEY,
    age           INTEGER NOT NULL,
    registered_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE leases (
    lock       TEXT NOT NULL,
    client     TEXT NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    token      INTEGER NOT NULL,
    granted_at INTEGER NOT NULL,    -- the instant the lease started (L3)
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (lock, client)
) WITHOUT ROWID;

CREATE INDEX leases_by_expiry ON leases (expires_at);

CREATE INDEX leases_by_client ON leases (client);

CREATE TABLE queue_entries (
    lock      TEXT NOT NULL,
    position  INTEGER NOT NULL,
    client    TEXT NOT NULL UNIQUE, -- a client waits for at most one lock (L8)
    mode      TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    ttl       INTEGER NOT NULL,     -- the lease length the waiter asked for
    queued_at INTEGER NOT NULL,
    PRIMARY KEY (lock, position)
) WITHOUT ROWID;

CREATE TABLE store_fences (
    lock          TEXT PRIMARY KEY,
    highest_token INTEGER NOT NULL
, key_count INTEGER NOT NULL DEFAULT 0, byte_count INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;

CREATE TABLE store_values (
    lock       TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    token      INTEGER NOT NULL,    -- the token the value was written with
    written_at INTEGER NOT NULL, owner TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (lock, key)
) WITHOUT ROWID;

CREATE VIEW client_status AS
SELECT c.name, c.age, q.lock AS waiting_for,
       (SELECT count(*) FROM leases l WHERE l.client = c.name) AS leases_held
  FROM clients c LEFT JOIN queue_entries q ON q.client = c.name;

CREATE TABLE aborts (
    client     TEXT NOT NULL,
    age        INTEGER NOT NULL,
    aborted_at INTEGER NOT NULL,
    requester  TEXT NOT NULL,
    lock       TEXT NOT NULL,
    cycle      TEXT NOT NULL,
    PRIMARY KEY (client, age)
) WITHOUT ROWID;

CREATE INDEX aborts_by_time ON aborts (aborted_at);

CREATE INDEX queue_entries_by_time ON queue_entries (queued_at);

CREATE TABLE store_owners (
    owner      TEXT PRIMARY KEY,
    byte_count INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE "grants_ended" (
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

CREATE INDEX leases_by_token ON leases (lock, token);

CREATE INDEX grants_ended_by_lock ON grants_ended (lock, token);

CREATE INDEX grants_ended_by_client ON grants_ended (client, granted_at, lock, token);

CREATE VIEW grants AS
    SELECT lock, token, client, mode, granted_at, expires_at,
           NULL AS ended_at, NULL AS ended, NULL AS ended_after_token FROM leases
    UNION ALL
    SELECT lock, token, client, mode, granted_at, expires_at, ended_at, ended, ended_after_token FROM grants_ended;

CREATE INDEX grants_ended_by_lock_order ON grants_ended (lock, ended_after_token, ended_at, token)
    WHERE ended_after_token <> token;
