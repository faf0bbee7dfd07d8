-- +goose Up
-- Creates kept by their Idempotency-Key (store.Idempotent): status 0
-- while the create runs; times in Unix nanoseconds.
CREATE TABLE idempotency (
	team        TEXT NOT NULL,
	key         TEXT NOT NULL,
	sum         TEXT NOT NULL,
	status      INTEGER NOT NULL DEFAULT 0,
	body        BLOB,
	lease_until INTEGER NOT NULL,
	expires     INTEGER NOT NULL,
	PRIMARY KEY (team, key)
);
CREATE INDEX idempotency_expires ON idempotency (expires);

-- +goose Down
DROP TABLE idempotency;
