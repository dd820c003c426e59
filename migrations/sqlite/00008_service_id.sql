-- +goose Up

-- The service's identity, created with its database: GET /v1/health's
-- service_id, LEASEKEEPER_SERVICE_ID under exec. Package fence keys the
-- tokens it checks in the job's own database by it (docs/fencing.md): a
-- recreated database starts its tokens from 1 again under another
-- identity, rather than being refused as stale for ever. 32 random hex
-- digits; a backup's copy gets new ones (repo.Backup), as its tokens fork
-- from the original's. Added without NOT NULL, which SQLite's ADD COLUMN
-- allows only with a constant default; the UPDATE gives the one row its
-- value.
ALTER TABLE service ADD COLUMN service_id TEXT;
UPDATE service SET service_id = lower(hex(randomblob(16)));

-- +goose Down
ALTER TABLE service DROP COLUMN service_id;
