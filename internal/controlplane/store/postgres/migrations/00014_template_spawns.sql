-- +goose Up
-- How many sandboxes each template started, counted with their created
-- events (store.Event.Template), kept when those are pruned.
CREATE TABLE template_spawns (
    template_id TEXT PRIMARY KEY,
    count       BIGINT NOT NULL,
    last_at     TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE template_spawns;
