-- +goose Up

-- The id of the last event of GET /v1/events (serve only: `leasekeeper run`
-- assigns none). Each transaction that has events bumps it by their number
-- and writes it back with the rest of the service row, so event ids
-- increase in commit order and keep increasing across restarts.
ALTER TABLE service ADD COLUMN event_id INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE service DROP COLUMN event_id;
