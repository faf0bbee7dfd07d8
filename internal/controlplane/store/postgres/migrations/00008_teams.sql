-- +goose Up
-- Teams: every API key belongs to one. A team's quotas, when above 0,
-- replace the server's defaults for it.
CREATE TABLE teams (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    created_at     TIMESTAMPTZ NOT NULL,
    max_sandboxes  INTEGER NOT NULL DEFAULT 0,
    max_cpus       INTEGER NOT NULL DEFAULT 0,
    max_memory_mb  BIGINT NOT NULL DEFAULT 0,
    max_disk_mb    BIGINT NOT NULL DEFAULT 0,
    max_storage_mb BIGINT NOT NULL DEFAULT 0
);
INSERT INTO teams (id, name, created_at) SELECT team, team, min(created_at) FROM api_keys GROUP BY team;
-- mask: the first 2 and last 4 characters of the key after "e2b_" (what
-- a listing shows of it); last_used: NULL = never.
ALTER TABLE api_keys ADD COLUMN mask TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN last_used TIMESTAMPTZ;

-- +goose Down
ALTER TABLE api_keys DROP COLUMN last_used;
ALTER TABLE api_keys DROP COLUMN mask;
DROP TABLE teams;
