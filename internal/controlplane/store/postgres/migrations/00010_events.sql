-- +goose Up
-- Sandboxes' lifecycle events, teams' webhooks and the deliveries on
-- their way to them (at least once: a delivery stays until its receiver
-- took it; a replica claims due ones for a lease).
CREATE TABLE events (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL,
    sandbox_id TEXT NOT NULL,
    type       TEXT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    body       BYTEA NOT NULL
);
CREATE INDEX events_team_at ON events (team, at);
CREATE INDEX events_sandbox_at ON events (sandbox_id, at);
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    url        TEXT NOT NULL,
    enabled    BOOLEAN NOT NULL,
    events     JSONB NOT NULL,
    secret     TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE deliveries (
    id         TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id   TEXT NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL DEFAULT 0,
    next_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX deliveries_next_at ON deliveries (next_at);

-- +goose Down
DROP TABLE deliveries;
DROP TABLE webhooks;
DROP TABLE events;
