-- leasekeeper fence: one row per fenced resource, with the highest fencing
-- token that wrote to it (docs/fencing.md). Run once per database; running
-- it again changes nothing.
CREATE TABLE IF NOT EXISTS leasekeeper_fence (
    service_id TEXT   NOT NULL, -- the leasekeeper service that issued the token (GET /v1/health's service_id)
    lock_name  TEXT   NOT NULL, -- the lock the token was granted on
    resource   TEXT   NOT NULL, -- what the job writes: a table, a partition, a name of the job's choosing
    token      BIGINT NOT NULL CHECK (token >= 1), -- the highest token that wrote
    PRIMARY KEY (service_id, lock_name, resource)
);
