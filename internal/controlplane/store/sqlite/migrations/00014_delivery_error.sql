-- +goose Up
-- Why a delivery's last attempt failed (cove webhook deliveries shows it).
ALTER TABLE deliveries ADD COLUMN last_error TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE deliveries DROP COLUMN last_error;
