-- +goose Up
-- A team's secrets: values sealed with the operator's key (never in the
-- clear here).
CREATE TABLE team_secrets (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    version    BIGINT NOT NULL,
    metadata   JSONB NOT NULL,
    sealed     BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    UNIQUE (team, name)
);

-- +goose Down
DROP TABLE team_secrets;
