-- +goose Up

-- Who wrote each value of the fenced store (the principal of the auth file,
-- '' without one, or for values written before this migration), and what
-- each such writer's values hold in all: the bytes of their keys and
-- values, kept by every write and delete, so that a principal's bound
-- (the auth file's max_store_bytes) and the server's (serve
-- --store-max-total, the sum over every writer) are checked without reading
-- any other value.
ALTER TABLE store_values ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE TABLE store_owners (
    owner      TEXT PRIMARY KEY,
    byte_count INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO store_owners (owner, byte_count)
    SELECT '', coalesce(sum(byte_count), 0) FROM store_fences;

-- +goose Down
DROP TABLE store_owners;
ALTER TABLE store_values DROP COLUMN owner;
