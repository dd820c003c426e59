-- +goose Up

-- As migrations/sqlite/00013_token_floor.sql: a new lock's first token is
-- token_floor + 1, 0 but after serve --accept-rollback.
ALTER TABLE service ADD COLUMN token_floor BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE service DROP COLUMN token_floor;
