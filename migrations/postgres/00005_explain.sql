-- +goose Up

-- The same as migrations/sqlite/00005_explain.sql, which says what each
-- index and column is for.
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;
ALTER TABLE grants ADD COLUMN ended_after_token BIGINT;
CREATE INDEX grants_ended_by_lock_order ON grants (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;

CREATE TABLE aborts (
    client     TEXT COLLATE "C" NOT NULL,
    age        BIGINT NOT NULL,
    aborted_at BIGINT NOT NULL,
    requester  TEXT COLLATE "C" NOT NULL,
    lock       TEXT COLLATE "C" NOT NULL,
    cycle      TEXT NOT NULL,
    PRIMARY KEY (client, age)
);
CREATE INDEX aborts_by_time ON aborts (aborted_at);

-- +goose Down
DROP TABLE aborts;
DROP INDEX grants_ended_by_lock_order;
ALTER TABLE grants DROP COLUMN ended_after_token;
DROP INDEX grants_ended_by_lock_time;
