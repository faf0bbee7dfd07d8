-- +goose Up
-- Template records (internal/template.Record as JSON), shared by a
-- cluster's API replicas and nodes; version guards read-modify-write.
CREATE TABLE templates (
    id      TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    record  JSONB NOT NULL
);

-- One row whose generation moves with every change of templates: a reader
-- reads them all again only when it moved.
CREATE TABLE templates_generation (
    one        BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
    generation BIGINT NOT NULL
);
INSERT INTO templates_generation (generation) VALUES (1);

-- +goose Down
DROP TABLE templates_generation;
DROP TABLE templates;
