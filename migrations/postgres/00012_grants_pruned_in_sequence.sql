-- +goose Up

-- The same as migrations/sqlite/00012_grants_pruned_in_sequence.sql, which
-- says why.
DROP INDEX grants_ended_by_end;

-- +goose Down
CREATE INDEX grants_ended_by_end ON grants_ended (ended_at);
