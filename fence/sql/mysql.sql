-- leasekeeper fence: one row per fenced resource, with the highest fencing
-- token that wrote to it (docs/fencing.md). Run once per database; running
-- it again changes nothing. VARBINARY compares bytes, as leasekeeper
-- compares names: under a case-insensitive collation "Orders" and "orders"
-- would share a row. InnoDB, whatever the server's default engine: the
-- check holds only in a table that takes row locks and rolls back.
CREATE TABLE IF NOT EXISTS leasekeeper_fence (
    service_id VARBINARY(64)  NOT NULL, -- the leasekeeper service that issued the token (GET /v1/health's service_id)
    lock_name  VARBINARY(256) NOT NULL, -- the lock the token was granted on
    resource   VARBINARY(512) NOT NULL, -- what the job writes: a table, a partition, a name of the job's choosing
    token      BIGINT NOT NULL CHECK (token >= 1), -- the highest token that wrote
    PRIMARY KEY (service_id, lock_name, resource)
) ENGINE = InnoDB;
