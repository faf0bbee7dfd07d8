-- +goose Up
CREATE TABLE api_keys (
    hash       TEXT PRIMARY KEY,
    team       TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

-- Times are unix nanoseconds, as the API compares and pages them.
CREATE TABLE sandboxes (
    id                    TEXT PRIMARY KEY,
    team                  TEXT NOT NULL,
    template_id           TEXT NOT NULL,
    alias                 TEXT NOT NULL DEFAULT '',
    state                 TEXT NOT NULL,
    started_at            BIGINT NOT NULL,
    end_at                BIGINT NOT NULL,
    cpu_count             INTEGER NOT NULL,
    memory_mb             INTEGER NOT NULL,
    disk_mb               INTEGER NOT NULL,
    metadata              JSONB NOT NULL DEFAULT '{}',
    allow_internet_access BOOLEAN,
    auto_pause            BOOLEAN NOT NULL DEFAULT false,
    auto_resume           BOOLEAN NOT NULL DEFAULT false,
    secure                BOOLEAN NOT NULL DEFAULT false,
    public_traffic        BOOLEAN NOT NULL DEFAULT true,
    isolation             TEXT NOT NULL DEFAULT '',
    envd_version          TEXT NOT NULL,
    node                  TEXT NOT NULL DEFAULT ''
);

CREATE INDEX sandboxes_team_started ON sandboxes (team, started_at, id);
CREATE INDEX sandboxes_node ON sandboxes (node);

-- A cluster's nodes, as each last reported itself (every second or so).
CREATE TABLE nodes (
    id                   TEXT PRIMARY KEY,
    url                  TEXT NOT NULL,
    drivers              TEXT[] NOT NULL,
    cpus                 INTEGER NOT NULL,
    memory_mb            BIGINT NOT NULL,
    committed_cpu_millis BIGINT NOT NULL,
    committed_memory_mb  BIGINT NOT NULL,
    sandboxes            INTEGER NOT NULL,
    heartbeat_at         TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE nodes;
DROP TABLE sandboxes;
DROP TABLE secrets;
DROP TABLE api_keys;
