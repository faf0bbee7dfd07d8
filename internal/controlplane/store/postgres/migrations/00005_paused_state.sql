-- +goose Up
-- A sandbox paused without its memory whose files are in the object
-- store: its node's record of it, from which another node takes it over
-- when that node is lost (the record's node is then '').
ALTER TABLE sandboxes ADD COLUMN paused_state BYTEA;

-- +goose Down
ALTER TABLE sandboxes DROP COLUMN paused_state;
