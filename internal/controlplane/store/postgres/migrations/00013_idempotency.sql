-- +goose Up
-- Creates kept by their Idempotency-Key (store.Idempotent), shared by
-- every API replica: status 0 while the create runs.
CREATE TABLE idempotency (
	team        text NOT NULL,
	key         text NOT NULL,
	sum         text NOT NULL,
	status      integer NOT NULL DEFAULT 0,
	body        bytea,
	lease_until timestamptz NOT NULL,
	expires     timestamptz NOT NULL,
	PRIMARY KEY (team, key)
);
CREATE INDEX idempotency_expires ON idempotency (expires);

-- +goose Down
DROP TABLE idempotency;
