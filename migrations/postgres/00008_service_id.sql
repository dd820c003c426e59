-- +goose Up

-- As migrations/sqlite/00008_service_id.sql: the service's identity, 32
-- random hex digits, one for every server sharing the database. A volatile
-- default is evaluated for the existing row when the column is added.
ALTER TABLE service ADD COLUMN service_id TEXT NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', '');
ALTER TABLE service ALTER COLUMN service_id DROP DEFAULT;

-- +goose Down
ALTER TABLE service DROP COLUMN service_id;
