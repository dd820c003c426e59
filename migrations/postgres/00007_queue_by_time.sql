-- +goose Up

-- The same as migrations/sqlite/00007_queue_by_time.sql, which says what
-- the index is for.
CREATE INDEX queue_entries_by_time ON queue_entries (queued_at);

-- +goose Down
DROP INDEX queue_entries_by_time;
