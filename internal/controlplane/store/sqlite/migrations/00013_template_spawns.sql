-- +goose Up
-- How many sandboxes each template started, counted with their created
-- events (store.Event.Template), kept when those are pruned; last_at in
-- Unix nanoseconds.
CREATE TABLE template_spawns (
	template_id TEXT PRIMARY KEY,
	count       INTEGER NOT NULL,
	last_at     INTEGER NOT NULL
);

-- +goose Down
DROP TABLE template_spawns;
