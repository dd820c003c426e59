-- +goose Up

-- The same tables as migrations/sqlite/00001_lock_state.sql, in PostgreSQL's
-- types; the comments there say what each column means. Differences:
--   * every name is TEXT COLLATE "C", so ORDER BY compares bytes, as the
--     contract's "byte-wise" order asks (a database's default collation
--     follows the locale);
--   * integers are BIGINT, the range of the contract's integers.

-- One row, locked FOR UPDATE by every transaction (repo.Lock): the point
-- where the servers sharing the database serialize (docs/deployment.md).
CREATE TABLE service (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    clock           BIGINT,
    last_client_age BIGINT NOT NULL DEFAULT 0
);
INSERT INTO service (id, clock) VALUES (1, NULL);

CREATE TABLE locks (
    name          TEXT COLLATE "C" PRIMARY KEY,
    last_token    BIGINT NOT NULL DEFAULT 0,
    queue_length  BIGINT NOT NULL DEFAULT 0,
    last_position BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE clients (
    name          TEXT COLLATE "C" PRIMARY KEY,
    age           BIGINT NOT NULL,
    registered_at BIGINT NOT NULL
);

CREATE TABLE leases (
    lock       TEXT COLLATE "C" NOT NULL,
    client     TEXT COLLATE "C" NOT NULL,
    mode       TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    token      BIGINT NOT NULL,
    granted_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (lock, client)
);
CREATE INDEX leases_by_expiry ON leases (expires_at);
CREATE INDEX leases_by_client ON leases (client);

CREATE TABLE queue_entries (
    lock      TEXT COLLATE "C" NOT NULL,
    position  BIGINT NOT NULL,
    client    TEXT COLLATE "C" NOT NULL UNIQUE,
    mode      TEXT NOT NULL CHECK (mode IN ('shared', 'exclusive')),
    ttl       BIGINT NOT NULL,
    queued_at BIGINT NOT NULL,
    PRIMARY KEY (lock, position)
);

CREATE TABLE store_fences (
    lock          TEXT COLLATE "C" PRIMARY KEY,
    highest_token BIGINT NOT NULL
);

CREATE TABLE store_values (
    lock       TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    value      TEXT NOT NULL,
    token      BIGINT NOT NULL,
    written_at BIGINT NOT NULL,
    PRIMARY KEY (lock, key)
);

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
