-- +goose Up

-- The token a lock's counter starts from, 0 but after serve
-- --accept-rollback: a database that went back in time lost the rows of
-- the locks created in its lost transactions, whose tokens were issued
-- all the same. Raising every lock's counter past the high-water mark
-- misses them; a new lock's first token is token_floor + 1, so that a lock
-- recreated after the rollback never issues one of its lost tokens again
-- (internal/engine/mark.go).
ALTER TABLE service ADD COLUMN token_floor INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE service DROP COLUMN token_floor;
