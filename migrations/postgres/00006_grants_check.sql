-- +goose Up

-- Nothing to do: migrations/sqlite/00006_grants_check.sql rewrites a check
-- that SQLite evaluates slowly, and PostgreSQL evaluates the same check
-- cheaply. The version exists on both so that it means the same tables.
SELECT 1;

-- +goose Down
SELECT 1;
