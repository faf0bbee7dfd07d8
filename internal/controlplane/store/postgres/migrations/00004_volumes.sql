-- +goose Up
-- A cluster's volumes: the records any API replica reads; the files are
-- on the node each names.
CREATE TABLE volumes (
    id         TEXT PRIMARY KEY,
    team       TEXT NOT NULL,
    name       TEXT NOT NULL,
    node       TEXT NOT NULL,
    size_mb    BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (team, name)
);
CREATE INDEX volumes_node ON volumes (node);

-- +goose Down
DROP TABLE volumes;
