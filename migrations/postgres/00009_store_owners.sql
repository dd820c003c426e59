-- +goose Up

-- The same as migrations/sqlite/00009_store_owners.sql, which says what
-- they hold.
ALTER TABLE store_values ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE TABLE store_owners (
    owner      TEXT PRIMARY KEY,
    byte_count BIGINT NOT NULL DEFAULT 0
);
INSERT INTO store_owners (owner, byte_count)
    SELECT '', coalesce(sum(byte_count), 0) FROM store_fences;

-- +goose Down
DROP TABLE store_owners;
ALTER TABLE store_values DROP COLUMN owner;
