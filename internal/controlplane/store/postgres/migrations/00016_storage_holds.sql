-- +goose Up
-- What teams' snapshots in progress hold of their storage quota, seen by
-- every API replica; a replica that dies mid-snapshot leaves its hold
-- until expires_at (unix nanoseconds).
CREATE TABLE storage_holds (
	id         TEXT PRIMARY KEY,
	team       TEXT NOT NULL,
	bytes      BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE INDEX storage_holds_team ON storage_holds (team);

-- +goose Down
DROP TABLE storage_holds;
