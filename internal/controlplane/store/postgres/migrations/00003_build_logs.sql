-- +goose Up
-- A cluster's template builds' logs, written by the node that runs each
-- build, read by any API replica; seq is the entry's place in its log.
CREATE TABLE build_logs (
    build_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    at       BIGINT NOT NULL, -- unix ns
    level    TEXT NOT NULL,
    message  TEXT NOT NULL,
    step     TEXT NOT NULL,
    PRIMARY KEY (build_id, seq)
);

-- +goose Down
DROP TABLE build_logs;
