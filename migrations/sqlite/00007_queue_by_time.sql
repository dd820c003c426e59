-- +goose Up

-- The metric leasekeeper_oldest_wait_seconds (docs/observability.md) reads
-- the earliest queued_at of every queue at each scrape: with this index,
-- one step down a B-tree, whatever the number of waiters and locks.
CREATE INDEX queue_entries_by_time ON queue_entries (queued_at);

-- +goose Down
DROP INDEX queue_entries_by_time;
