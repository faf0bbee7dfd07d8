-- +goose Up
ALTER TABLE sandboxes ADD COLUMN public_traffic INTEGER NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN public_traffic;
