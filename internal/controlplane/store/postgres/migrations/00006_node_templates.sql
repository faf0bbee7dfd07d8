-- +goose Up
-- What a node holds of templates, for placement: its warm sandboxes ready
-- by template id, and the templates whose newest build's layers it has.
ALTER TABLE nodes ADD COLUMN warm JSONB NOT NULL DEFAULT '{}';
ALTER TABLE nodes ADD COLUMN cached TEXT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE nodes DROP COLUMN cached;
ALTER TABLE nodes DROP COLUMN warm;
