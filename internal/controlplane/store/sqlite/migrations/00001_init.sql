-- +goose Up
CREATE TABLE api_keys (
    hash       TEXT PRIMARY KEY,
    team       TEXT NOT NULL,
    name       TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL
);

CREATE TABLE secrets (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL
);

CREATE TABLE sandboxes (
    id                    TEXT PRIMARY KEY,
    team                  TEXT NOT NULL,
    template_id           TEXT NOT NULL,
    alias                 TEXT NOT NULL DEFAULT '',
    state                 TEXT NOT NULL,
    started_at            INTEGER NOT NULL, -- unix nanoseconds
    end_at                INTEGER NOT NULL,
    cpu_count             INTEGER NOT NULL,
    memory_mb             INTEGER NOT NULL,
    disk_mb               INTEGER NOT NULL,
    metadata              TEXT NOT NULL DEFAULT '{}',
    allow_internet_access INTEGER,
    auto_pause            INTEGER NOT NULL DEFAULT 0,
    secure                INTEGER NOT NULL DEFAULT 0,
    envd_version          TEXT NOT NULL
);

CREATE INDEX sandboxes_team_started ON sandboxes (team, started_at, id);

-- +goose Down
DROP TABLE sandboxes;
DROP TABLE secrets;
DROP TABLE api_keys;
