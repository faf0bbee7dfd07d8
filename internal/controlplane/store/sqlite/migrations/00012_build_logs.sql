-- +goose Up
-- Template builds' logs (store.Store.AppendBuildLog), kept past the
-- build and the server's restarts; seq is the entry's place in its log.
CREATE TABLE build_logs (
	build_id TEXT NOT NULL,
	seq      INTEGER NOT NULL,
	at       INTEGER NOT NULL, -- unix ns
	level    TEXT NOT NULL,
	message  TEXT NOT NULL,
	step     TEXT NOT NULL,
	PRIMARY KEY (build_id, seq)
);

-- +goose Down
DROP TABLE build_logs;
