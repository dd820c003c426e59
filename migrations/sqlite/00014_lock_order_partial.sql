-- +goose Up

-- The index of ends in end order holds only the rows that ended after a
-- token other than their own (repo/explain.go, inEndOrder): a reader that
-- outlived the grant of a later token, or a waiter's grant found lapsed
-- during a hand-over that granted a later token before its expiry. Every
-- other end (every exclusive lease, a reader alone)
-- ended while its own token was the lock's last, and the index by lock
-- and token already holds it in that order. An end of an exclusive lease
-- writes two index entries rather than three (docs/performance.md, "An
-- exclusive end without an entry in end order").
DROP INDEX grants_ended_by_lock_order;
CREATE INDEX grants_ended_by_lock_order ON grants_ended (lock, ended_after_token, ended_at, token)
    WHERE ended_after_token <> token;

-- +goose Down
DROP INDEX grants_ended_by_lock_order;
CREATE INDEX grants_ended_by_lock_order ON grants_ended (lock, ended_after_token, ended_at, token);
