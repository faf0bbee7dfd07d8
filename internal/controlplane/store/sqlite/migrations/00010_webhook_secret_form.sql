-- +goose Up
-- A webhook's secret is stored in a form its prefix names: "sealed:"
-- (sealed with the operator's secrets key, base64) or "plain:" (as given,
-- where the API has no key). The secrets stored before were as given.
UPDATE webhooks SET secret = 'plain:' || secret WHERE secret <> '';

-- +goose Down
UPDATE webhooks SET secret = substr(secret, 7) WHERE secret LIKE 'plain:%';
