-- +goose Up
ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN node;
