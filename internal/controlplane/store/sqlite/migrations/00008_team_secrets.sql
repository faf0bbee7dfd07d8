-- +goose Up
-- A team's secrets: values sealed with the operator's key (never in the
-- clear here); times in unix milliseconds.
CREATE TABLE team_secrets (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL,
    metadata   TEXT NOT NULL,
    sealed     BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (team, name)
);

-- +goose Down
DROP TABLE team_secrets;
