-- +goose Up

-- What each lock's fenced store holds, kept by every accepted write, so that
-- a write is checked against the lock's quota (serve --store-max-keys,
-- --store-max-bytes) without reading the lock's other values: key_count
-- keys, byte_count bytes of keys and values (octet_length of each, as
-- UTF-8). Both are kept whether or not a quota is set, so that one set
-- later holds from the first write.
ALTER TABLE store_fences ADD COLUMN key_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE store_fences ADD COLUMN byte_count INTEGER NOT NULL DEFAULT 0;
UPDATE store_fences SET
    key_count = (SELECT count(*) FROM store_values v WHERE v.lock = store_fences.lock),
    byte_count = (SELECT coalesce(sum(octet_length(v.key) + octet_length(v.value)), 0)
                    FROM store_values v WHERE v.lock = store_fences.lock);

-- +goose Down
ALTER TABLE store_fences DROP COLUMN byte_count;
ALTER TABLE store_fences DROP COLUMN key_count;
