-- +goose Up

-- The same columns as migrations/sqlite/00002_store_usage.sql, which says
-- what they hold.
ALTER TABLE store_fences ADD COLUMN key_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE store_fences ADD COLUMN byte_count BIGINT NOT NULL DEFAULT 0;
UPDATE store_fences SET
    key_count = (SELECT count(*) FROM store_values v WHERE v.lock = store_fences.lock),
    byte_count = (SELECT coalesce(sum(octet_length(v.key) + octet_length(v.value)), 0)
                    FROM store_values v WHERE v.lock = store_fences.lock);

-- +goose Down
ALTER TABLE store_fences DROP COLUMN byte_count;
ALTER TABLE store_fences DROP COLUMN key_count;
