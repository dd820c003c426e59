-- +goose Up

-- One row. clock is the service's current time: the largest ts any operation
-- advanced it to (docs/contract.md rule 5); NULL until the first operation.
-- last_client_age keeps the registration counter (D1) across the deletion of
-- aborted clients: the counter is the larger of it and max(clients.age), so
-- it is written only when a client is unregistered, and ages are never reused.
CREATE TABLE service (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    clock           INTEGER,
    last_client_age INTEGER NOT NULL DEFAULT 0
);
INSERT INTO service (id, clock) VALUES (1, NULL);

-- Every lock ever acquired. Rows are never deleted, so the fencing counter
-- survives times when nobody holds or awaits the lock (L5).
CREATE TABLE locks (
    name          TEXT PRIMARY KEY,
    last_token    INTEGER NOT NULL DEFAULT 0, -- highest fencing token issued
    queue_length  INTEGER NOT NULL DEFAULT 0, -- rows in queue_entries for this lock
    last_position INTEGER NOT NULL DEFAULT 0  -- highest queue position handed out
) WITHOUT ROWID;

-- Registered clients (D1). age is the registration number: younger = larger.
-- An aborted client's row is deleted; registering again gives it a new age
-- from service.last_client_age, larger than every age given before. The lock
-- a client waits for is its row in queue_entries (view client_status).
CREATE TABLE clients (
    name          TEXT PRIMARY KEY,
    age           INTEGER NOT NULL,
    registered_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Live leases. A lease is usable while ts < expires_at (L2); lapsed ones are
-- deleted in expires_at order (L1, L3).
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

-- Waiters, FIFO per lock (L4). position grows per lock and is never reused; a
-- waiter's place in line is its rank among its lock's entries, so a withdrawal
-- rewrites no other row.
CREATE TABLE queue_entries (
    lock      TEXT NOT NULL,
    position  INTEGER NOT NULL,
    client    TEXT NOT NULL UNIQUE, -- a client waits for at most one lock (L8)
    mode      TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    ttl       INTEGER NOT NULL,     -- the lease length the waiter asked for
    queued_at INTEGER NOT NULL,
    PRIMARY KEY (lock, position)
) WITHOUT ROWID;

-- The fenced store (L6): the highest token accepted per lock, and the last
-- accepted value per lock and key. Independent of the lock tables.
CREATE TABLE store_fences (
    lock          TEXT PRIMARY KEY,
    highest_token INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE store_values (
    lock       TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    token      INTEGER NOT NULL,    -- the token the value was written with
    written_at INTEGER NOT NULL,
    PRIMARY KEY (lock, key)
) WITHOUT ROWID;

-- For people reading the state: each registered client with its age, the
-- lock it waits for and how many leases it holds.
CREATE VIEW client_status AS
SELECT c.name, c.age, q.lock AS waiting_for,
       (SELECT count(*) FROM leases l WHERE l.client = c.name) AS leases_held
  FROM clients c LEFT JOIN queue_entries q ON q.client = c.name;

-- +goose Down
DROP VIEW client_status;
DROP TABLE store_values;
DROP TABLE store_fences;
DROP TABLE queue_entries;
DROP TABLE leases;
DROP TABLE clients;
DROP TABLE locks;
DROP TABLE service;
