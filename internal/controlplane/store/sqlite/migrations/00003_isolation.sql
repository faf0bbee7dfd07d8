-- +goose Up
ALTER TABLE sandboxes ADD COLUMN isolation TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN isolation;
