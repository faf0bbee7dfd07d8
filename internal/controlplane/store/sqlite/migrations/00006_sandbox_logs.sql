-- +goose Up
-- Sandboxes' lifecycle logs, kept after a sandbox ends (for its team).
CREATE TABLE sandbox_logs (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id TEXT NOT NULL,
    team       TEXT NOT NULL,
    at         INTEGER NOT NULL, -- unix ns
    level      TEXT NOT NULL,
    message    TEXT NOT NULL,
    fields     TEXT NOT NULL -- a JSON object of strings
);
CREATE INDEX sandbox_logs_sandbox ON sandbox_logs (sandbox_id, at);
CREATE INDEX sandbox_logs_at ON sandbox_logs (at);

-- +goose Down
DROP TABLE sandbox_logs;
