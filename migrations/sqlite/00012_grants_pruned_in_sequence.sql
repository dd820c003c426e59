-- +goose Up

-- Ended grants past their days are pruned in the order they were recorded
-- (seq, the table's own key), no longer through an index on ended_at: an
-- end writes one index entry fewer (docs/performance.md, "Pruning by age
-- in sequence"). The rows are recorded in nearly the order they ended (a
-- lapse noticed late comes after later ends), so a row that ended before
-- the bound but was recorded after a younger one goes when that one does.
DROP INDEX grants_ended_by_end;

-- +goose Down
CREATE INDEX grants_ended_by_end ON grants_ended (ended_at);
