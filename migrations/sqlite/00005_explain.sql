-- +goose Up

-- Answers that say why (docs/api.md).
--
-- A grant's predecessors are the leases of its lock that ended after the
-- lock's previous grant: this index finds them, and a lock's last hold
-- times for the queue estimate, by reading only those rows. Like
-- grants_ended_by_lock it holds only ended rows.
CREATE INDEX grants_ended_by_lock_time ON grants (lock, ended_at) WHERE ended IS NOT NULL;

-- ended_after_token is the lock's last issued token when the lease ended
-- (for a lapse, the last token granted before its expires_at), written
-- with ended: it orders ends and grants within a second, which ended_at
-- cannot. A grant T's predecessors are the leases that ended while T-1
-- was the lock's last token; this index reads just them, in the order
-- they are returned. NULL for rows ended before this migration.
ALTER TABLE grants ADD COLUMN ended_after_token INTEGER;
CREATE INDEX grants_ended_by_lock_order ON grants (lock, ended_after_token, ended_at, token) WHERE ended IS NOT NULL;

-- One row per deadlock victim (D4): who was aborted, at which age
-- (its registration, D1), when, by whose acquire, the lock it waited for
-- ('' for none), and cycle, the set of clients on wait cycles through the
-- requester when the victim was chosen, oldest first, as JSON
-- ([{"client", "age", "waits_for"}]). GET /v1/status shows a victim its
-- last one until it registers again. Pruned with the grant history
-- (serve --history-days).
CREATE TABLE aborts (
    client     TEXT NOT NULL,
    age        INTEGER NOT NULL,
    aborted_at INTEGER NOT NULL,
    requester  TEXT NOT NULL,
    lock       TEXT NOT NULL,
    cycle      TEXT NOT NULL,
    PRIMARY KEY (client, age)
) WITHOUT ROWID;
CREATE INDEX aborts_by_time ON aborts (aborted_at);

-- +goose Down
DROP TABLE aborts;
DROP INDEX grants_ended_by_lock_order;
ALTER TABLE grants DROP COLUMN ended_after_token;
DROP INDEX grants_ended_by_lock_time;
