-- +goose Up

-- As migrations/sqlite/00004_event_ids.sql. Every transaction of every
-- server holds the service row's lock (repo.Lock) when it bumps the counter,
-- so one sequence orders the events of all the servers sharing the
-- database, in commit order.
ALTER TABLE service ADD COLUMN event_id BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE service DROP COLUMN event_id;
