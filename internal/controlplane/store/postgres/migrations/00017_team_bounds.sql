-- +goose Up
-- Each team's records are bounded (store.Limits). An event's body is
-- stored without its sandbox metadata, which its team keeps once per
-- content in event_metadata (by SHA-256, metadata_sum; '' for none, or
-- for a body stored whole before this); event_totals counts each team's
-- events and their bytes (bodies and metadata), so that adding one finds
-- at once whether the oldest must go.
ALTER TABLE events ADD COLUMN metadata_sum TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
UPDATE events SET size = octet_length(body);
CREATE INDEX events_team_metadata ON events (team, metadata_sum);
CREATE TABLE event_metadata (
    team     TEXT NOT NULL,
    sum      TEXT NOT NULL,
    metadata BYTEA NOT NULL,
    PRIMARY KEY (team, sum)
);
CREATE TABLE event_totals (
    team   TEXT PRIMARY KEY,
    events BIGINT NOT NULL,
    bytes  BIGINT NOT NULL
);
INSERT INTO event_totals (team, events, bytes) SELECT team, count(*), sum(size) FROM events GROUP BY team;
-- The lines of a team's sandboxes' logs and their bytes (message and
-- fields), counted as events are.
ALTER TABLE sandbox_logs ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
UPDATE sandbox_logs SET size = octet_length(message) + octet_length(fields::text);
CREATE INDEX sandbox_logs_team ON sandbox_logs (team, seq);
CREATE TABLE log_totals (
    team  TEXT PRIMARY KEY,
    lines BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
INSERT INTO log_totals (team, lines, bytes) SELECT team, count(*), sum(size) FROM sandbox_logs GROUP BY team;
-- The team whose webhook a delivery waits for, to bound what waits.
ALTER TABLE deliveries ADD COLUMN team TEXT NOT NULL DEFAULT '';
UPDATE deliveries SET team = w.team FROM webhooks w WHERE w.id = deliveries.webhook_id;
CREATE INDEX deliveries_team ON deliveries (team);
-- A team's keys by expiry: those a claim past the team's bound drops.
CREATE INDEX idempotency_team_expires ON idempotency (team, expires);

-- +goose Down
DROP INDEX idempotency_team_expires;
DROP INDEX deliveries_team;
ALTER TABLE deliveries DROP COLUMN team;
DROP TABLE log_totals;
DROP INDEX sandbox_logs_team;
ALTER TABLE sandbox_logs DROP COLUMN size;
DROP TABLE event_totals;
DROP TABLE event_metadata;
DROP INDEX events_team_metadata;
ALTER TABLE events DROP COLUMN size;
ALTER TABLE events DROP COLUMN metadata_sum;
