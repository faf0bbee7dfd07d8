-- +goose Up
-- The range a node's sandboxes take their addresses from ("" without
-- node networking): what the API replicas send no webhook into.
ALTER TABLE nodes ADD COLUMN sandbox_range text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE nodes DROP COLUMN sandbox_range;
